#include "analysis/model/failed_requests.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gmt::analysis {
namespace {

// The Python frames of a stack, innermost first, as (function, file, line).
std::vector<std::tuple<std::string, std::string, int64_t>> python_frames(const Stack& stack) {
  std::vector<std::tuple<std::string, std::string, int64_t>> frames;
  for (const Frame& frame : stack.frames) {
    if (frame.python) frames.emplace_back(frame.function.value_or(""), frame.file.value_or(""), frame.line.value_or(0));
  }
  return frames;
}

// Whether the CUDA-level failure `attempt` was made inside the framework request that failed as `request`.
bool made_inside(const AllocFailure& attempt, const AllocFailure& request) {
  if (attempt.heap_source || attempt.thread_id != request.thread_id || attempt.device != request.device) return false;
  // Within one thread event ids follow the thread's order (the recorder keeps each thread's events in order).
  if (attempt.event_id <= request.previous_request_event_id || attempt.event_id >= request.event_id) return false;
  const auto attempt_frames = python_frames(attempt.stack);
  const auto request_frames = python_frames(request.stack);
  return attempt_frames.empty() || request_frames.empty() || attempt_frames == request_frames;
}

}  // namespace

void link_failed_attempts(Report& report) {
  std::vector<AllocFailure>& failures = report.failures;
  std::vector<bool> claimed(failures.size(), false);
  uint64_t attempts = 0;
  for (size_t r = 0; r < failures.size(); ++r) {
    AllocFailure& request = failures[r];
    if (!request.heap_source) continue;
    // Its attempts precede it: walk back until the thread's previous request (in time order, as failures are).
    std::vector<size_t> inside;
    for (size_t a = r; a-- > 0;) {
      const AllocFailure& earlier = failures[a];
      if (earlier.thread_id == request.thread_id && earlier.event_id <= request.previous_request_event_id) break;
      if (!claimed[a] && made_inside(earlier, request)) inside.push_back(a);
    }
    for (auto it = inside.rbegin(); it != inside.rend(); ++it) {
      claimed[*it] = true;
      request.attempts.push_back(std::move(failures[*it]));
      ++attempts;
    }
  }
  if (attempts == 0) return;
  std::vector<AllocFailure> kept;
  kept.reserve(failures.size() - attempts);
  for (size_t i = 0; i < failures.size(); ++i) {
    if (!claimed[i]) kept.push_back(std::move(failures[i]));
  }
  failures = std::move(kept);
  report.totals.failed_allocations -= std::min(report.totals.failed_allocations, attempts);
  report.totals.failed_attempts_in_requests += attempts;
}

}  // namespace gmt::analysis
