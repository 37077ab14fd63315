#include "analysis/model/allocator_stats.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "analysis/format.h"
#include "analysis/model/report.h"
#include "analysis/read/allocator_stats.h"

namespace gmt::analysis {
namespace {

using schema::FrameworkAllocator;
using schema::SampleTrigger;

bool is_torch(FrameworkAllocator allocator) {
  return allocator == FrameworkAllocator::TorchCaching || allocator == FrameworkAllocator::TorchExpandable ||
         allocator == FrameworkAllocator::TorchMallocAsync;
}

void add_sample(AllocatorDevice& d, const AllocatorSample& s) {
  if (d.samples == 0 || s.in_use_bytes > d.peak_in_use_bytes) {
    d.peak_in_use_bytes = s.in_use_bytes;
    d.peak_in_use_time_ns = s.time_ns;
  }
  if (d.samples == 0 || s.reserved_bytes > d.peak_reserved_bytes) {
    d.peak_reserved_bytes = s.reserved_bytes;
    d.peak_reserved_time_ns = s.time_ns;
  }
  const uint64_t cached = s.reserved_bytes > s.in_use_bytes ? s.reserved_bytes - s.in_use_bytes : 0;
  if (d.samples == 0 || cached > d.peak_cached_bytes) {
    d.peak_cached_bytes = cached;
    d.peak_cached_time_ns = s.time_ns;
  }
  if (s.inactive_split_bytes &&
      (!d.peak_inactive_split_bytes || *s.inactive_split_bytes > *d.peak_inactive_split_bytes)) {
    d.peak_inactive_split_bytes = s.inactive_split_bytes;
    d.peak_inactive_split_time_ns = s.time_ns;
    d.reserved_at_peak_inactive_split_bytes = s.reserved_bytes;
  }
  if (s.alloc_retries) d.alloc_retries = std::max(d.alloc_retries.value_or(0), *s.alloc_retries);
  if (s.ooms) d.ooms = std::max(d.ooms.value_or(0), *s.ooms);
  ++d.samples;
  ++d.samples_by_trigger[static_cast<int>(s.trigger)];
  d.last = s;
  if (d.series.size() < kMaxAllocatorSamples) {
    d.series.push_back(s);
  } else {
    ++d.series_left_out;
  }
}

void conclude(AllocatorDevice& d) {
  d.allocator_id = allocator_id(d.allocator);
  d.allocator_name = allocator_display_name(d.allocator);
  d.cached_at_end_bytes = d.last.reserved_bytes > d.last.in_use_bytes ? d.last.reserved_bytes - d.last.in_use_bytes : 0;
  if (d.allocator != FrameworkAllocator::TorchCaching || !d.peak_inactive_split_bytes) return;
  const uint64_t split = *d.peak_inactive_split_bytes;
  const uint64_t reserved = d.reserved_at_peak_inactive_split_bytes;
  if (split < kFragmentedMinBytes || reserved == 0) return;
  const double share = static_cast<double>(split) / static_cast<double>(reserved);
  if (share <= kFragmentedShare && !(split >= kFragmentedLargeBytes && share >= kFragmentedLargeShare)) return;
  d.fragmented = true;
  d.advice = fmt::format(
      "{:.0f}% of the reserved memory was free but split inside partly used blocks at {} ({} of {}): PyTorch "
      "cannot hand it to a larger tensor, so it reserves more (and may fail with memory still free). Run with "
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: segments then grow in place and freed blocks merge "
      "again; compare the two traces with `gpumemtrace diff`.",
      100.0 * static_cast<double>(split) / static_cast<double>(reserved),
      format_duration(d.peak_inactive_split_time_ns), format_bytes(split), format_bytes(reserved));
}

}  // namespace

std::string allocator_id(FrameworkAllocator allocator) { return std::string(schema::to_string(allocator)); }

std::string allocator_display_name(FrameworkAllocator allocator) {
  switch (allocator) {
    case FrameworkAllocator::TorchCaching: return "PyTorch caching allocator";
    case FrameworkAllocator::TorchExpandable: return "PyTorch caching allocator, expandable segments";
    case FrameworkAllocator::TorchMallocAsync: return "PyTorch cudaMallocAsync backend";
    case FrameworkAllocator::CupyPool: return "CuPy memory pool";
    case FrameworkAllocator::JaxXla: return "JAX/XLA allocator";
  }
  return "unknown allocator";
}

std::string cache_explanation(FrameworkAllocator allocator) {
  switch (allocator) {
    case FrameworkAllocator::TorchCaching:
    case FrameworkAllocator::TorchExpandable:
      return "PyTorch's cache of freed blocks, not a leak: torch.cuda.empty_cache() gives it back to CUDA";
    case FrameworkAllocator::TorchMallocAsync:
      return "kept by the CUDA memory pool for reuse, not a leak: torch.cuda.empty_cache() trims the pool";
    case FrameworkAllocator::CupyPool:
      return "CuPy's pool of freed blocks, not a leak: cupy.get_default_memory_pool().free_all_blocks() releases it";
    case FrameworkAllocator::JaxXla:
      return "JAX's preallocated pool, not a leak: XLA_PYTHON_CLIENT_ALLOCATOR=platform allocates each buffer on its "
             "own (per-buffer truth), XLA_PYTHON_CLIENT_PREALLOCATE=false grows the pool on demand instead";
  }
  return "held by the allocator for reuse, not a leak";
}

std::optional<AllocatorStats> read_allocator_stats(const TraceFile& trace,
                                                   const std::function<int64_t(int64_t)>& relative) {
  AllocatorStats stats;
  std::map<int64_t, AllocatorDevice> devices;
  const bool has_table = for_each_allocator_sample(trace, [&](const AllocatorStatsRow& row) {
    AllocatorSample s;
    s.time_ns = relative(row.time_ns);
    s.trigger = row.trigger;
    s.in_use_bytes = row.in_use_bytes.value_or(0);
    s.reserved_bytes = row.reserved_bytes.value_or(0);
    s.inactive_split_bytes = row.inactive_split_bytes;
    s.alloc_retries = row.alloc_retries;
    s.ooms = row.ooms;
    s.request_bytes = row.request_bytes;
    AllocatorDevice& d = devices[row.device];
    d.device = row.device;
    d.allocator = row.allocator;
    add_sample(d, s);
    ++stats.samples;
    if (s.trigger == SampleTrigger::Oom && is_torch(d.allocator)) {
      AllocatorOom oom;
      oom.time_ns = s.time_ns;
      oom.device = row.device;
      oom.allocator = d.allocator;
      oom.sample = s;
      stats.ooms.push_back(std::move(oom));
    }
  });
  if (!has_table) return std::nullopt;
  for (auto& [device, d] : devices) {
    conclude(d);
    stats.devices.push_back(std::move(d));
  }
  return stats;
}

}  // namespace gmt::analysis
