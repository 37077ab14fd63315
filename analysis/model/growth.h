// Growth detection, internal to analysis/ (the rule is written down in docs/analysis.md; keep both in step).
//
// The analyzed interval runs from the first to the last allocation (frees after the last allocation are
// the program's shutdown and say nothing about growth). It is cut into kGrowthWindows windows of equal
// time, fewer when there are few changes (kChangesPerWindow per window at least), and never fewer than
// kMinGrowthWindows: otherwise growth is not analyzed and Growth::reason says why. For each device, the
// low watermark of a window is the least live bytes at any moment in it (the level carried in included).
// The first window is the warm-up (the program loads its weights and creates its workspaces there; its low
// watermark is what was live before that) and is left out of everything below.
//
// A device grows steadily when all three hold over the remaining windows:
//   1. the least-squares line through the low watermarks has a positive slope;
//   2. the low watermark rose from one window to the next in more than half of the steps;
//   3. the fitted rise (slope times the time from the first to the last analyzed window) is at least
//      max(1 MiB, 5% of the device's peak).
// A steady state (the same working set allocated and freed again and again) has flat low watermarks and
// fails 1 to 3; noise around a flat level fails 2 or 3.
// A device that fails them may still grow since a later window (the late-start rule, evaluate_growth): a
// leak that began after a long steady run, rising without a fall over the last windows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "analysis/model/report.h"
#include "analysis/model/timeline.h"

namespace gmt::analysis {

// The steadiness part of the growth rule, for windows and for repetitions alike (docs/analysis.md): the
// series rose in at least a quarter of its steps (and at least twice), and fell in at most half as many steps
// as it rose. A caching allocator grows in segment-sized stairs (a new segment every few steps, flat in
// between, never down), which this accepts; noise around a level falls about as often as it rises, and a
// one-time rise rises once, which it refuses.
inline bool rises_steadily(uint64_t rising_steps, uint64_t falling_steps, uint64_t steps) {
  return rising_steps >= std::min<uint64_t>(2, steps) && rising_steps * 4 >= steps && falling_steps * 2 <= rising_steps;
}

inline constexpr size_t kGrowthWindows = 20;
inline constexpr size_t kMinGrowthWindows = 5;
inline constexpr uint64_t kChangesPerWindow = 10;
inline constexpr uint64_t kMinGrowthBytes = uint64_t{1} << 20;
inline constexpr uint64_t kGrowthPeakFraction = 20;  // 1/20 = 5% of the peak
inline constexpr size_t kMinLateWindows = 4;         // the late-start rule's shortest suffix: 4 windows, 3 steps

// The low watermark of each window of one device, and the moment it was first reached.
struct WindowLows {
  std::vector<uint64_t> lows;
  std::vector<uint64_t> positions;  // ChangeLog position (changes applied) of that moment
  std::vector<int64_t> times;       // absolute; the window's start when the low is the carried-in level
};

// Window lows of every device that changed in [t0, t1] (absolute times, t1 >= t0), `windows` windows.
std::map<int64_t, WindowLows> window_lows(const ChangeLog& log, int64_t t0, int64_t t1, size_t windows);

// The rule above on one device's low watermarks (the first is the warm-up). `window_s`: the window width in
// seconds; `peak_bytes`: the device's peak.
GrowthDevice evaluate_growth(int64_t device, const std::vector<uint64_t>& lows, double window_s, uint64_t peak_bytes);

// Growth over the whole log: Growth::devices and Growth::findings without stacks or projection. For each
// finding, `moments` gets the (start, end) snapshot requests to compare stacks at.
Growth analyze_growth(const ChangeLog& log, const std::map<int64_t, uint64_t>& device_peaks, int64_t origin,
                      std::vector<std::pair<SnapshotRequest, SnapshotRequest>>& moments);

// The groups whose bytes grew between the two snapshots, largest growth first, at most `top`.
void attach_growth_stacks(GrowthFinding& finding, const std::vector<GroupBytes>& start,
                          const std::vector<GroupBytes>& end, size_t top, StackGroups& groups);

}  // namespace gmt::analysis
