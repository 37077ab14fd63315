// `gpumemtrace diff`: two reports of the same program compared for CI (docs/analysis.md, "Diff"). Peak
// (total and per device), leaks per call stack, growth findings.
//
// Stacks of two runs have different ids and pcs (another build, another load address), so leaks are
// matched by what their frames resolve to: per frame, function + source file + line when symbolized, else
// the module's file name + the offset of the pc in it (pc - load base), else nothing matchable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

struct DiffOptions {
  // "Grew beyond the threshold": new - base > threshold, where the threshold is either a byte count or a
  // percentage of the base value. 0 bytes (the default): any growth.
  uint64_t threshold_bytes = 0;
  std::optional<double> threshold_percent;
};

enum class DiffStatus { New, Gone, Grew, Shrank, Same };
const char* to_string(DiffStatus status);

struct LeakDiff {
  std::string key;  // the matching key (diff_stack_key)
  Stack stack;      // the new run's stack when it has one, else the base run's
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  uint64_t base_count = 0;
  uint64_t new_count = 0;
  DiffStatus status = DiffStatus::Same;
  bool regression = false;  // a new leak stack, or grown beyond the threshold
  int64_t delta() const { return static_cast<int64_t>(new_bytes - base_bytes); }
};

struct PeakDiff {
  std::optional<int64_t> device;  // nullopt: the total peak; -1: host memory
  uint64_t base_bytes = 0;
  uint64_t new_bytes = 0;
  bool regression = false;  // grown beyond the threshold
  int64_t delta() const { return static_cast<int64_t>(new_bytes - base_bytes); }
};

struct GrowthDiff {
  int64_t device = -1;
  std::optional<double> base_rate_bytes_per_s;  // nullopt: no finding on this device in that run
  std::optional<double> new_rate_bytes_per_s;
  const char* status() const;  // "appeared", "disappeared", "both"
  bool regression() const { return new_rate_bytes_per_s && !base_rate_bytes_per_s; }
};

// A framework allocator's own figures on one device in both runs (allocator_stats.h), side by side: e.g. the
// default PyTorch allocator against expandable segments. Informational: never a regression by itself.
struct AllocatorFigures {
  std::string allocator;  // allocator_display_name
  uint64_t peak_reserved_bytes = 0;
  uint64_t peak_in_use_bytes = 0;
  std::optional<uint64_t> peak_inactive_split_bytes;
  std::optional<uint64_t> alloc_retries;
  std::optional<uint64_t> ooms;
};
struct AllocatorDiff {
  int64_t device = -1;
  std::optional<AllocatorFigures> base;  // nullopt: no allocator samples on this device in that run
  std::optional<AllocatorFigures> next;
};

struct TraceDiff {
  std::string base_path;
  std::string new_path;
  DiffOptions options;
  PeakDiff total_peak;
  std::vector<PeakDiff> device_peaks;  // by device; a device only one run used has 0 in the other
  PeakDiff leaked;                     // total leaked bytes (device unused), after suppressions
  std::vector<LeakDiff> leaks;         // regressions first, then by |delta| descending
  std::vector<GrowthDiff> growth;      // by device
  bool base_growth_analyzed = false;
  bool new_growth_analyzed = false;
  std::vector<AllocatorDiff> allocators;  // by device; empty when neither run has allocator samples
  std::vector<std::string> regressions;   // one sentence each, in the order: leaks, peaks, growth
};

// The matching key of a stack (see the top of this file); frames separated by '\x1e'.
std::string diff_stack_key(const Stack& stack);

TraceDiff diff_reports(const Report& base, const Report& next, const DiffOptions& options);

std::string render_diff_text(const TraceDiff& diff);
// {base, new, threshold: {bytes, percent}, regression (bool), regressions[] (sentences),
//  peak: {base_bytes, new_bytes, delta_bytes, regression}, devices[]: {device, base_bytes, ...},
//  leaked: {base_bytes, new_bytes, delta_bytes, regression},
//  leaks[]: {status, base_bytes, new_bytes, delta_bytes, base_count, new_count, regression, stack[]},
//  growth: {base_analyzed, new_analyzed, devices[]: {device, status, base_rate_bytes_per_s, new_rate_bytes_per_s,
//           regression}},
//  allocators[]: {device, base, new} where base/new are null or {allocator, peak_reserved_bytes, peak_in_use_bytes,
//                peak_inactive_split_bytes, alloc_retries, ooms}}
std::string render_diff_json(const TraceDiff& diff);

}  // namespace gmt::analysis
