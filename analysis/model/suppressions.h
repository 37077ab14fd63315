// Suppressions: known leaks that a CI gate should not fail on (docs/analysis.md, "Suppressions").
//
//   # one rule per line; blank lines and lines starting with '#' are ignored
//   leak:load_weights            glob against any frame's function name
//   leak-module:libnccl.so*      glob against any frame's module file name (no directory)
//   leak-file:*/third_party/*    glob against any frame's source file
//
// Globs: '*' any run of characters (also '/'), '?' one character, everything else literal. A leaked
// allocation is suppressed by the first rule, in file order, that matches a frame of its call stack.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/model/timeline.h"

namespace gmt::analysis {

// A suppressions file that cannot be used; what() is one line starting with "FILE:LINE: ".
class SuppressionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SuppressionRule {
  enum class Field { Function, Module, File };
  Field field = Field::Function;
  std::string pattern;
  std::string text;    // the rule as written, trimmed
  std::string origin;  // "FILE:LINE"
};

struct SuppressionSet {
  std::vector<SuppressionRule> rules;
};

// Parses one file's text; `name` is used in messages and origins. Throws SuppressionError.
void parse_suppressions(std::string_view text, const std::string& name, SuppressionSet& into);

// Reads and parses each file in turn. Throws SuppressionError (also for a file that cannot be read).
SuppressionSet load_suppressions(const std::vector<std::string>& paths);

// '*' and '?' globs, matched against the whole text.
bool glob_match(std::string_view pattern, std::string_view text);

// The index of the first rule that matches a frame of `stack`, or -1.
int match_suppression(const SuppressionSet& set, const Stack& stack);

// Used by the model while it groups the allocations still live at the end: decides once per raw stack
// whether it is suppressed and counts what each rule took.
class LeakSuppressor {
 public:
  LeakSuppressor(const SuppressionSet& set, StackLoadFn load_stack, StackKeyFn stack_key);

  // True (and counted) when the allocation's stack is suppressed.
  bool suppress(int64_t stack_id, uint64_t bytes);
  bool is_suppressed(int64_t stack_id) const;
  std::vector<SuppressedLeaks> results() const;

 private:
  const SuppressionSet& set_;
  StackLoadFn load_stack_;
  StackKeyFn stack_key_;
  std::unordered_map<int64_t, int> rule_of_stack_;       // -1: not suppressed
  std::vector<SuppressedLeaks> outcome_;                 // one per rule
  std::vector<std::unordered_set<std::string>> groups_;  // per rule: the stack groups it matched
};

}  // namespace gmt::analysis
