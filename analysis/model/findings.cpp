// Findings from a Report (analysis/model/findings.h).
#include "analysis/model/findings.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "analysis/format.h"
#include "analysis/model/heaps.h"
#include "analysis/model/stack_view.h"

namespace gmt::analysis {
namespace {

// The text of line `line` of `path`, trimmed, when the file is readable here (the report may run on another
// machine than the app: then there is none). Files are read once per report.
class SourceLines {
 public:
  std::string line(const std::string& path, int64_t number) {
    if (number <= 0) return "";
    auto [it, added] = files_.try_emplace(path);
    if (added) {
      std::ifstream in(path);
      std::string text;
      // A source file of more than 200k lines is not worth reading for one line of a report.
      while (in && it->second.size() < 200'000 && std::getline(in, text)) it->second.push_back(text);
    }
    const std::vector<std::string>& lines = it->second;
    if (static_cast<size_t>(number) > lines.size()) return "";
    const std::string& text = lines[static_cast<size_t>(number) - 1];
    const size_t begin = text.find_first_not_of(" \t");
    if (begin == std::string::npos) return "";
    const size_t end = text.find_last_not_of(" \t\r");
    std::string trimmed = text.substr(begin, end - begin + 1);
    if (trimmed.size() > 120) trimmed = trimmed.substr(0, 117) + "...";
    return trimmed;
  }

 private:
  std::map<std::string, std::vector<std::string>> files_;
};

// What an API is called in a via line: PyTorch's block actions are its caching allocator's.
std::string api_name(schema::Api api) {
  switch (api) {
    case schema::Api::torchBlockAlloc: return "PyTorch's caching allocator";
    case schema::Api::nvtxMemRegionsRegister: return "an NVTX-memory-API heap";
    case schema::Api::cupyBlockAlloc: return "CuPy's memory pool";
    default: return std::string(schema::to_string(api));
  }
}

// A frame's place in a via line: its module, or a Python frame's package and function.
std::string via_part(const Frame& frame) {
  if (frame.python) {
    const std::string file = frame.file.value_or("?");
    const size_t packages = file.find("-packages/");
    std::string where = path_basename(file);
    if (packages != std::string::npos) {
      const size_t start = packages + 10;
      where = file.substr(start, file.find('/', start) - start);
    }
    return where + " `" + frame.function.value_or("?") + "`";
  }
  if (frame.module) return path_basename(*frame.module);
  return "??";
}

// "torch `linear` -> libtorch_cuda.so -> libc10_cuda.so -> cudaMalloc": the frames under the user's frame,
// outermost first, one part per run of the same module, then the API that allocated.
std::string via_line(const Stack& stack, const Frame* user, const std::vector<schema::Api>& apis) {
  const std::vector<const Frame*> frames = frames_without_start(stack);
  size_t below = frames.size();  // frames [0, below) lie under the user's frame
  for (size_t i = 0; i < frames.size(); ++i) {
    if (frames[i] == user) below = i;
  }
  std::vector<std::string> parts;
  for (size_t i = below; i-- > 0;) {
    if (frame_owner(*frames[i]) == FrameOwner::Profiler) continue;
    std::string part = via_part(*frames[i]);
    if (parts.empty() || parts.back() != part) parts.push_back(std::move(part));
  }
  if (parts.size() > 6) {  // a deep library stack: its ends say where it went
    const size_t dropped = parts.size() - 4;
    parts.erase(parts.begin() + 2, parts.end() - 2);
    parts.insert(parts.begin() + 2, fmt::format("({} more)", dropped));
  }
  for (schema::Api api : apis) {
    std::string name = api_name(api);
    if (parts.empty() || parts.back() != name) parts.push_back(std::move(name));
  }
  std::string line;
  for (const std::string& part : parts) line += (line.empty() ? "" : " -> ") + part;
  return line;
}

Finding named_at(FindingKind kind, uint64_t bytes, std::string verdict, const Stack& stack,
                 const std::vector<schema::Api>& apis, SourceLines& sources) {
  Finding finding;
  finding.kind = kind;
  finding.bytes = bytes;
  finding.verdict = std::move(verdict);
  finding.stack_id = stack.id;
  const Frame* user = user_frame(stack);
  if (user) {
    finding.user_frame = frame_label(*user);
    if (user->file && user->line) finding.source_text = sources.line(*user->file, *user->line);
  }
  finding.via = via_line(stack, user, apis);
  return finding;
}

// The CUDA-level attempts inside a framework's failed request (failed_requests.h), as its evidence: "inside it 2
// CUDA-level cudaMalloc attempts failed (out of memory); PyTorch's caching allocator released 3 cached segments
// (60.00 MiB) to retry"; "" when none failed at the CUDA level.
std::string attempts_sentence(const AllocFailure& failure) {
  if (failure.attempts.empty()) return "";
  std::vector<std::string> apis;
  std::vector<std::string> labels;
  for (const AllocFailure& attempt : failure.attempts) {
    std::string api(schema::to_string(attempt.api));
    if (std::find(apis.begin(), apis.end(), api) == apis.end()) apis.push_back(api);
    if (std::find(labels.begin(), labels.end(), attempt.label) == labels.end()) labels.push_back(attempt.label);
  }
  auto joined = [](const std::vector<std::string>& parts) {
    std::string text;
    for (const std::string& part : parts) text += (text.empty() ? "" : "/") + part;
    return text;
  };
  const size_t count = failure.attempts.size();
  std::string sentence = fmt::format("inside it {} CUDA-level {} {} failed ({})", count, joined(apis),
                                     count == 1 ? "attempt" : "attempts", joined(labels));
  if (failure.segments_released > 0) {
    sentence +=
        fmt::format("; {} released {} ({}) to retry", failure.allocator.empty() ? "the allocator" : failure.allocator,
                    count_of(failure.segments_released, "cached segment", "cached segments"),
                    format_bytes(failure.segment_bytes_released));
  }
  return sentence;
}

// "during backward() at train_step /src/train.py:42": the backward() call a worker thread's group was made for.
std::string during_text(const LeakGroup& group) {
  if (group.backward_stack_id == kBackwardCallerUnknown) return "during backward() (of several running at once)";
  if (group.backward_stack_id <= 0) return "";
  const Frame* caller = user_frame(group.backward_stack);
  return caller ? "during backward() at " + frame_label(*caller) : "during backward()";
}

}  // namespace

std::string_view to_string(FindingKind kind) {
  switch (kind) {
    case FindingKind::Leak: return "leak";
    case FindingKind::Growth: return "growth";
    case FindingKind::RangeGrowth: return "range_growth";
    case FindingKind::FailedAllocation: return "failed_allocation";
  }
  return "unknown";
}

std::string unsampled_block_stack_text(const TraceInfo& trace) {
  if (trace.block_stack_sample_bytes == 0) return {};
  return fmt::format("(stack not sampled: blocks under {0} take theirs one per {0} allocated, run "
                     "--sample-block-stacks)",
                     format_bytes(trace.block_stack_sample_bytes));
}

std::string unsampled_stack_text(const TraceInfo& trace, const LeakGroup& group) {
  if (group.stack.id != 0 || group.memory_kinds.empty() ||
      !std::all_of(group.memory_kinds.begin(), group.memory_kinds.end(), is_block_kind)) {
    return {};
  }
  return unsampled_block_stack_text(trace);
}

std::vector<Finding> findings_of(const Report& report) {
  SourceLines sources;
  std::vector<Finding> findings;
  // Memory live at the end of a trace that may be missing events (a crash, dropped events) is not a verdict. JAX/XLA's
  // arena, whose buffers are unknown, is in no leak group and leaves the others exact (model.h listed_leaks_exact).
  const bool trusted_end = report.trace.complete && report.trace.dropped_events == 0 && listed_leaks_exact(report);
  // Cut by --until or --at: what was live at that moment, not at exit, is no leak verdict.
  const EventFilters& filters = report.filters.filters;
  const std::string cut =
      !filters.until_ns ? ""
      : filters.until_snapshot
          ? fmt::format("live at the snapshot {} ({})", *filters.until_snapshot, format_duration(*filters.until_ns))
          : fmt::format("live at {} into the run", format_duration(*filters.until_ns));
  for (const LeakGroup& group : report.leaks) {
    std::string verdict =
        !cut.empty() ? fmt::format("{}: {} in {}", cut, format_bytes(group.bytes),
                                   count_of(group.count, "allocation", "allocations"))
                     : fmt::format("{}: {} in {} {}", trusted_end ? "leak" : "live at the end of an incomplete trace",
                                   format_bytes(group.bytes), count_of(group.count, "allocation", "allocations"),
                                   trusted_end ? "still held at exit" : "(not necessarily leaked)");
    Finding finding = named_at(FindingKind::Leak, group.bytes, std::move(verdict), group.stack, group.apis, sources);
    finding.during = during_text(group);
    if (finding.during.empty()) finding.during = unsampled_stack_text(report.trace, group);
    if (finding.user_frame.empty() && group.backward_stack_id > 0) {  // the caller's line, for the source text
      if (const Frame* caller = user_frame(group.backward_stack); caller && caller->file && caller->line) {
        finding.source_text = sources.line(*caller->file, *caller->line);
      }
    }
    if (group.first_alloc_ns != group.last_alloc_ns) {
      finding.detail = fmt::format("allocated from {} to {}", format_duration(group.first_alloc_ns),
                                   format_duration(group.last_alloc_ns));
    }
    findings.push_back(std::move(finding));
  }
  for (const GrowthFinding& growth : report.growth.findings) {
    const uint64_t grown =
        growth.end_low_bytes > growth.start_low_bytes ? growth.end_low_bytes - growth.start_low_bytes : 0;
    std::string verdict =
        fmt::format("steady growth on {}: +{} that stayed allocated between {} and {}", device_name(growth.device),
                    format_bytes(grown), format_duration(growth.start_time_ns), format_duration(growth.end_time_ns));
    const Stack empty;
    const Stack& stack = growth.stacks.empty() ? empty : growth.stacks.front().stack;
    Finding finding = named_at(FindingKind::Growth, grown, std::move(verdict), stack, {}, sources);
    for (const GrowthDevice& device : report.growth.devices) {
      if (device.device != growth.device) continue;
      finding.detail = fmt::format("the low watermark rose in {} of {} windows", device.rising_steps, device.steps);
    }
    if (!growth.stacks.empty()) {
      const GrowthStack& top = growth.stacks.front();
      finding.detail += fmt::format("{}the largest growth at one line: +{}", finding.detail.empty() ? "" : "; ",
                                    format_bytes(top.end_bytes - top.start_bytes));
    }
    findings.push_back(std::move(finding));
  }
  for (const RangeGrowth& range : report.ranges.growth) {
    const uint64_t per = static_cast<uint64_t>(std::max(0.0, std::round(range.bytes_per_iteration)));
    const uint64_t grown = static_cast<uint64_t>(std::max(0.0, range.fitted_rise_bytes));
    std::string name = range.domain.empty() ? range.name : range.domain + "::" + range.name;
    std::string verdict = fmt::format("NVTX range `{}` keeps +{} per repetition ({} over {} repetitions)", name,
                                      format_bytes(per), format_bytes(grown), range.iterations);
    const Stack empty;
    const Stack& stack = range.stacks.empty() ? empty : range.stacks.front().stack;
    Finding finding = named_at(FindingKind::RangeGrowth, grown, std::move(verdict), stack, {}, sources);
    finding.detail =
        fmt::format("live bytes at the range's end rose in {} of {} steps", range.rising_steps, range.steps);
    findings.push_back(std::move(finding));
  }
  for (const AllocFailure& failure : report.failures) {
    std::string verdict = fmt::format("failed allocation of {} on {}: {}", format_bytes(failure.requested_bytes),
                                      device_name(failure.device), failure.label);
    // A framework allocator's failure, at the level it happened: its cache, not the device.
    if (failure.heap_source && failure.heap) {
      const HeapSpace& heap = *failure.heap;
      verdict = failure.label == "heap fragmentation"
                    ? fmt::format("failed allocation of {} on {}: fragmentation inside {}'s cache ({} free in it, "
                                  "largest free block {})",
                                  format_bytes(failure.requested_bytes), device_name(failure.device), failure.allocator,
                                  format_bytes(heap.free_bytes), format_bytes(heap.largest_free_bytes))
                    : fmt::format("failed allocation of {} on {}: out of memory in {} ({} free in its cache)",
                                  format_bytes(failure.requested_bytes), device_name(failure.device), failure.allocator,
                                  format_bytes(heap.free_bytes));
    }
    Finding finding = named_at(FindingKind::FailedAllocation, failure.requested_bytes, std::move(verdict),
                               failure.stack, {failure.api}, sources);
    finding.evidence = attempts_sentence(failure);
    finding.detail = finding.evidence;
    if (failure.device_free) {
      finding.detail += fmt::format("{}{} of the device was free then", finding.detail.empty() ? "" : "; ",
                                    format_bytes(static_cast<uint64_t>(*failure.device_free)));
    }
    if (!failure.best_setting.empty()) {
      finding.detail += (finding.detail.empty() ? "" : "; ") + failure.best_setting;
    }
    findings.push_back(std::move(finding));
  }
  std::stable_sort(findings.begin(), findings.end(),
                   [](const Finding& a, const Finding& b) { return a.bytes > b.bytes; });
  return findings;
}

}  // namespace gmt::analysis
