// A framework allocator's own statistics (the allocator_stats table, schema v6: PyTorch's caching allocator,
// CuPy's pool, JAX/XLA), per device: in use vs reserved over time, the allocator's own fragmentation figures
// (inactive split bytes, alloc retries, OOMs), what is cache rather than leak at the end, advice when
// fragmentation is high under PyTorch's default allocator, and each PyTorch out-of-memory error with the
// CUDA-level picture at that moment. Rules in docs/analysis.md ("Framework allocators' own statistics").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

struct StackBytes;  // model.h

// The advice rule: under PyTorch's default caching allocator, the peak inactive split bytes are at least
// kFragmentedMinBytes and either above kFragmentedShare of the reserved bytes at that sample, or at least
// kFragmentedLargeBytes and kFragmentedLargeShare of them (on a big GPU a small share is still a lot of memory
// no larger tensor can use: 307 MiB, 6.7% of 4.5 GiB at its sampled peak, in samples/torch_fragmenting.py on
// the H200).
inline constexpr double kFragmentedShare = 0.25;
inline constexpr uint64_t kFragmentedMinBytes = 32ull << 20;
inline constexpr double kFragmentedLargeShare = 0.05;
inline constexpr uint64_t kFragmentedLargeBytes = 256ull << 20;
// Samples kept per device for the curves (JSON, HTML); the figures always cover every sample.
inline constexpr size_t kMaxAllocatorSamples = 20000;

struct AllocatorSample {
  int64_t time_ns = 0;  // relative to the process start
  schema::SampleTrigger trigger = schema::SampleTrigger::Cadence;
  uint64_t in_use_bytes = 0;
  uint64_t reserved_bytes = 0;
  std::optional<uint64_t> inactive_split_bytes;
  std::optional<uint64_t> alloc_retries;  // cumulative
  std::optional<uint64_t> ooms;           // cumulative
  std::optional<uint64_t> request_bytes;  // trigger Oom
};

struct AllocatorDevice {
  int64_t device = -1;
  schema::FrameworkAllocator allocator = schema::FrameworkAllocator::TorchCaching;  // of the last sample
  std::string allocator_id;    // "pytorch_caching", ... (as analysis/model/allocators.h names them)
  std::string allocator_name;  // "PyTorch caching allocator"
  uint64_t samples = 0;
  uint64_t samples_by_trigger[schema::kMaxSampleTrigger + 1] = {};
  uint64_t peak_in_use_bytes = 0;
  int64_t peak_in_use_time_ns = 0;
  uint64_t peak_reserved_bytes = 0;
  int64_t peak_reserved_time_ns = 0;
  // The most cached-but-free memory (reserved - in use) at one sample.
  uint64_t peak_cached_bytes = 0;
  int64_t peak_cached_time_ns = 0;
  std::optional<uint64_t> peak_inactive_split_bytes;  // nullopt: the allocator has no such figure
  int64_t peak_inactive_split_time_ns = 0;
  uint64_t reserved_at_peak_inactive_split_bytes = 0;
  std::optional<uint64_t> alloc_retries;  // the highest (cumulative) count sampled
  std::optional<uint64_t> ooms;
  AllocatorSample last;                 // the last sample: what the allocator held at the end
  uint64_t cached_at_end_bytes = 0;     // last.reserved - last.in_use: cache, not a leak
  bool fragmented = false;              // the advice rule held
  std::string advice;                   // empty when there is none
  std::vector<AllocatorSample> series;  // in time order, at most kMaxAllocatorSamples
  uint64_t series_left_out = 0;
};

// One PyTorch out-of-memory error (a sample with trigger Oom).
struct AllocatorOom {
  int64_t time_ns = 0;  // relative
  int64_t device = -1;
  schema::FrameworkAllocator allocator = schema::FrameworkAllocator::TorchCaching;
  AllocatorSample sample;
  // The CUDA-level failed allocation on the device just before (at most kOomFailureWindowNs earlier), with
  // cudaMemGetInfo's free bytes when recorded; absent when the allocator failed without a CUDA-level failure
  // (e.g. a memory fraction limit).
  std::optional<int64_t> cuda_failure_event_id;
  std::optional<uint64_t> cuda_failure_request_bytes;
  std::optional<int64_t> device_free_bytes;
  std::optional<int64_t> device_total_bytes;
  // CUDA-level memory live on the device at that moment, by call stack (largest first) and in total.
  uint64_t cuda_live_bytes = 0;
  std::vector<StackBytes> top_stacks;
  uint64_t stack_groups = 0;
};
inline constexpr int64_t kOomFailureWindowNs = 5'000'000'000;

struct AllocatorStats {
  uint64_t samples = 0;
  std::vector<AllocatorDevice> devices;  // by device
  std::vector<AllocatorOom> ooms;        // in time order
};

// From the allocator_stats table (read/allocator_stats.h); nullopt when the trace has none (traces before v6).
// `relative` turns an absolute time into time since the process start. The OOMs' CUDA-level parts are filled by the
// caller.
std::optional<AllocatorStats> read_allocator_stats(const TraceFile& trace,
                                                   const std::function<int64_t(int64_t)>& relative);

// "pytorch_caching" etc. and the name for people, as analysis/model/allocators.h names them.
std::string allocator_id(schema::FrameworkAllocator allocator);
std::string allocator_display_name(schema::FrameworkAllocator allocator);
// What the cache at the end is and how to release it, one sentence.
std::string cache_explanation(schema::FrameworkAllocator allocator);

}  // namespace gmt::analysis
