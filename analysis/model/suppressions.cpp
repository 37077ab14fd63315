#include "analysis/model/suppressions.h"

#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

std::string_view trim(std::string_view text) {
  const char* spaces = " \t\r\n";
  size_t first = text.find_first_not_of(spaces);
  if (first == std::string_view::npos) return {};
  size_t last = text.find_last_not_of(spaces);
  return text.substr(first, last - first + 1);
}

struct Kind {
  std::string_view prefix;
  SuppressionRule::Field field;
};
constexpr Kind kKinds[] = {{"leak:", SuppressionRule::Field::Function},
                           {"leak-module:", SuppressionRule::Field::Module},
                           {"leak-file:", SuppressionRule::Field::File}};

bool frame_matches(const SuppressionRule& rule, const Frame& frame) {
  switch (rule.field) {
    case SuppressionRule::Field::Function: return frame.function && glob_match(rule.pattern, *frame.function);
    case SuppressionRule::Field::Module: return frame.module && glob_match(rule.pattern, path_basename(*frame.module));
    case SuppressionRule::Field::File: return frame.file && glob_match(rule.pattern, *frame.file);
  }
  return false;
}

}  // namespace

void parse_suppressions(std::string_view text, const std::string& name, SuppressionSet& into) {
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t end = text.find('\n');
    std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.empty() || line.front() == '#') continue;
    const std::string origin = fmt::format("{}:{}", name, line_number);
    const Kind* kind = nullptr;
    for (const Kind& candidate : kKinds) {
      if (line.substr(0, candidate.prefix.size()) == candidate.prefix) kind = &candidate;
    }
    if (!kind) {
      throw SuppressionError(
          fmt::format("{}: '{}' is not a suppression: expected leak:FUNCTION, leak-module:MODULE or leak-file:FILE "
                      "(globs with * and ?)",
                      origin, line));
    }
    std::string_view pattern = trim(line.substr(kind->prefix.size()));
    if (pattern.empty()) {
      throw SuppressionError(fmt::format("{}: '{}' has an empty pattern", origin, line));
    }
    into.rules.push_back(SuppressionRule{kind->field, std::string(pattern), std::string(line), origin});
  }
}

SuppressionSet load_suppressions(const std::vector<std::string>& paths) {
  SuppressionSet set;
  for (const std::string& path : paths) {
    std::error_code error;
    std::ifstream in(path, std::ios::binary);
    std::stringstream content;
    if (in && !std::filesystem::is_directory(path, error)) content << in.rdbuf();
    if (!in || in.bad() || std::filesystem::is_directory(path, error))
      throw SuppressionError(fmt::format("{}: cannot read the suppressions file", path));
    parse_suppressions(content.str(), path, set);
  }
  return set;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative matching with one backtrack point for the last '*': linear in practice, never exponential.
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

int match_suppression(const SuppressionSet& set, const Stack& stack) {
  for (size_t i = 0; i < set.rules.size(); ++i) {
    for (const Frame& frame : stack.frames) {
      if (frame_matches(set.rules[i], frame)) return static_cast<int>(i);
    }
  }
  return -1;
}

LeakSuppressor::LeakSuppressor(const SuppressionSet& set, StackLoadFn load_stack, StackKeyFn stack_key)
    : set_(set),
      load_stack_(std::move(load_stack)),
      stack_key_(std::move(stack_key)),
      outcome_(set.rules.size()),
      groups_(set.rules.size()) {
  for (size_t i = 0; i < set.rules.size(); ++i) {
    outcome_[i].rule = set.rules[i].text;
    outcome_[i].origin = set.rules[i].origin;
  }
}

bool LeakSuppressor::suppress(int64_t stack_id, uint64_t bytes) {
  auto [it, inserted] = rule_of_stack_.try_emplace(stack_id, -1);
  if (inserted && !set_.rules.empty()) {
    const Stack& stack = load_stack_(stack_id);
    it->second = match_suppression(set_, stack);
    if (it->second >= 0) groups_[static_cast<size_t>(it->second)].insert(stack_key_(stack));
  }
  if (it->second < 0) return false;
  SuppressedLeaks& outcome = outcome_[static_cast<size_t>(it->second)];
  outcome.bytes += bytes;
  ++outcome.count;
  return true;
}

bool LeakSuppressor::is_suppressed(int64_t stack_id) const {
  auto it = rule_of_stack_.find(stack_id);
  return it != rule_of_stack_.end() && it->second >= 0;
}

std::vector<SuppressedLeaks> LeakSuppressor::results() const {
  std::vector<SuppressedLeaks> results = outcome_;
  for (size_t i = 0; i < results.size(); ++i) results[i].groups = groups_[i].size();
  return results;
}

}  // namespace gmt::analysis
