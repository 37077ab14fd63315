// Renderers: a Report (model.h) as text for a person or as JSON for scripts. They only format; every number
// comes from the Report, so text and JSON always agree.
#pragma once

#include <cstddef>
#include <string>

#include "analysis/model/report.h"

namespace gmt::analysis {

struct RenderOptions {
  // Leak groups shown, largest first; the rest are summarized in one line (text) or counted (JSON). The
  // model keeps every group so that this cut is the renderer's alone.
  size_t top = 10;
  // Lines shown per stack in the text report (0: all). JSON always carries every frame.
  size_t max_frames = 16;
  // Every frame of a stack, none folded (analysis/model/stack_view.h); process and thread start frames stay dropped.
  bool full_stacks = false;
  // C++ names as recorded, template arguments and parameter lists included.
  bool full_names = false;
  // Single allocations shown by the formats that ship them (perfetto, html: analysis/model/allocation_slices.h).
  size_t max_allocations = 20'000;
};

// The report for a terminal: header, totals, peak (with a sparkline and what was live then), leaks by call
// stack, growth, memory by NVTX range, fragmentation, failed allocations (with their OOM label), pools.
std::string render_text(const Report& report, const RenderOptions& options = {});

// The same report as a JSON document (pretty printed, indent 2, trailing newline). Shape, with every
// field always present (null where unknown):
//   trace:  path, pid, command_line, hostname, backend, backend_reason, backend_note, tool_version, schema_version,
//   duration_ns,
//           duration_from_events, complete, salvaged (null, or the sentence saying what a damaged trace lost:
//           the trace is then incomplete), missing_tables ([] or "the trace has no <table> table: ..." notes),
//           simulated, symbolized, block_stack_sample_bytes (v13: 0, or the size under which a block's
//           stack was sampled, `run --sample-block-stacks`), dropped_events, event_count
//   devices[]: ordinal, name, uuid, total_bytes, pci_bus_id (the devices table; [] before schema v6)
//   cross_check: null unless the trace comes from run --verify (render_json_parts.h has its shape)
//   totals: allocations, allocated_bytes, frees (these two CUDA-level), failed_allocations,
//           failed_attempts_in_requests, block_allocations, block_frees (a framework heap's blocks), leaked_bytes,
//           leaked_allocations,
//           peak_bytes, peak_time_ns, unmatched_frees, inconsistencies
//   peak_by_kind, peak_time_ns_by_kind, leaked_by_kind: {device, managed, host_pinned}
//   leak_groups: {total, shown, not_shown, below_min_bytes, bytes_below_min_bytes, min_bytes}
//   leaks[]: rank, bytes, count, stack_id, stack_missing, memory_kinds[], apis[], devices[],
//            first_alloc_ns, last_alloc_ns, stack[], python_line, during (null, or for tensors that autograd's
//            worker threads made during a backward() call: call "backward", caller_known, stack_id, python_line,
//            stack[] of the calling thread)
//   imported: other processes' memory opened here (in no total above): opens, closes, peak_bytes,
//             peak_time_ns, devices[] (device, peak_bytes, peak_time_ns, opens, open_at_end_bytes),
//             left_open_handles, left_open_bytes, left_open[] (bytes, count, apis[], devices[], stack_id,
//             stack_ids, stack_missing, stack[]): render_json_parts.h
//   allocators[]: id, name, leaked_bytes, leaked_allocations, leak_groups, advice (analysis/model/allocators.h)
//   (every stack[] frame: level, pc, function, file, line, module, python: true for a Python frame)
//   suppressed[]: rule, origin ("FILE:LINE"), bytes, count, groups, used (false: the rule matched nothing)
//   failures[]: event_id, time_ns, api, memory_kind, requested_bytes, error, error_name, device,
//               device_free, device_total, stack_id, stack_missing, stack[],
//               label ("fragmentation", "out of memory", "unknown", "other error"), largest_free_gap,
//               fragmentation (a fragmentation{} or null), top_stacks[] (a held{} each), allocator, heap,
//               thread_id; a framework's failed request also attempts[] (the CUDA-level failures made inside it,
//               each a failures[] item; they are in no other list), segments_released, segment_bytes_released
//   peak_stacks[]: device, bytes, time_ns, stack_groups, stacks[] (held{}, largest first)
//   growth: analyzed, reason (null when analyzed), windows, window_ns, start_ns, end_ns,
//           devices[]: device, low_watermarks[], slope_bytes_per_s, fitted_rise_bytes, threshold_bytes,
//                      rising_steps, falling_steps, steps, growing
//           findings[]: device, rate_bytes_per_s, start_time_ns, end_time_ns, start_low_bytes, end_low_bytes,
//                       projection ({device_total_bytes, seconds_until_full} or null), growing_stack_groups,
//                       stacks[]: growth_bytes, start_bytes, end_bytes, stack_id, stack_ids, stack_missing, stack[]
//   fragmentation[]: device, measures ("address_space_layout": virtual-address gaps between the driver's
//                    allocations, which do not say whether an allocation fits), at_peak (fragmentation{} or null),
//                    at_end (fragmentation{})
//   heap_fragmentation[]: source, allocator, device, peak_held_bytes, peak_time_ns, at_peak, at_end (heap{}:
//                    segments, reserved_bytes, held_bytes, free_bytes, largest_free_bytes),
//                    pinned_at_peak[], pinned_at_end[] (the live blocks in segments with free bytes, by call stack,
//                    most free_bytes first: blocks, bytes, segments, free_bytes, stack_id, stack_ids, stack_missing,
//                    stack[], user_frame, stack_view[]), bucket_ns, over_time[] (the heap at the end of each bucket
//                    from the process start: time_ns, reserved_bytes, held_bytes, free_bytes, largest_free_bytes)
//   pools: null when the trace has neither a pool_usage table nor a pool allocation, else []: pool ("0x..."),
//          device, samples, peak_reserved_bytes, peak_used_bytes, last_reserved_bytes, last_used_bytes,
//          max_unused_bytes, max_unused_time_ns, kind ("created", "default", "graph", "unrecorded"),
//          used_from_events (true: the used bytes are exact), peak_used_time_ns, end_used_bytes (at the end of the
//          trace), allocations, live_allocations, reserved_sampled (true), last_sample_time_ns,
//          series[]: time_ns, reserved_bytes (sampled), used_bytes, unused_bytes
//   allocator_stats: null when the trace has no allocator_stats table, else {samples,
//          devices[]: device, allocator ("pytorch_caching", ...), allocator_name, samples, samples_by_trigger{},
//                     peak_in_use_bytes, peak_in_use_time_ns, peak_reserved_bytes, peak_reserved_time_ns,
//                     peak_cached_bytes, peak_cached_time_ns, peak_inactive_split_bytes,
//                     peak_inactive_split_time_ns, reserved_at_peak_inactive_split_bytes, alloc_retries, ooms,
//                     in_use_at_end_bytes, reserved_at_end_bytes, cached_at_end_bytes, cache (a sentence),
//                     fragmented, advice (null: none), series[] (sample{}), series_left_out
//          ooms[]: time_ns, device, allocator, request_bytes, in_use_bytes, reserved_bytes, inactive_split_bytes,
//                  alloc_retries, ooms, cuda_failure_event_id, device_free, device_total, cuda_live_bytes,
//                  stack_groups, top_stacks[] (held{})}
//     sample{}: time_ns, trigger ("cadence", "range_end", "oom", "exit"), in_use_bytes, reserved_bytes,
//               inactive_split_bytes, alloc_retries, ooms, request_bytes (null where the allocator has none)
//   ranges: available, range_count,
//           by_name[]: name, domain (null: default), none, repetitions, allocations, allocated_bytes, frees,
//                      freed_bytes, live_allocations, live_bytes, peak_live_bytes
//           repeated[], growth[]: name, domain, iterations, bytes_per_iteration, live_bytes_at_end[],
//                      fitted_rise_bytes, threshold_bytes, rising_steps, falling_steps, steps, growing,
//                      growing_stack_groups, stacks[] (as growth.findings[].stacks[])
//   range_spans[]: name, domain, thread_id, start_ns, end_ns (null: never closed), depth; range_spans_left_out
//   filters (after trace): device, since_ns, until_ns, pid, min_size, range (null when not given),
//            allocations_matched, allocations_seen, nothing_matched (null or one line)
//   breakdown: by_thread[] (thread), by_stream[] (stream, "0x..."), by_module[] (module, path, label), each
//              with allocations, allocated_bytes, leaked_bytes, peak_bytes (live at the total peak)
//   tensor_blocks: null without the block-level mode (run --torch-blocks), else overruns, totals (as above, of
//           tensor blocks: leaked_* = alive at exit), alive_groups {total, shown, below_min_bytes},
//           alive_at_exit[] (as leaks[], plus python_line "file:function:line"), peak_stacks[], growth (as growth,
//           each findings[].stacks[] with python_line), range_growth[] (as ranges.growth[], stacks with python_line)
//   timeline: bucket_ns, bucket_count, total[] (bucket{}), series[]: device, memory_kind, buckets[] (bucket{}),
//             series_not_tracked
//   held{}: bytes, count, stack_id, stack_ids, stack_missing, stack[]
//   fragmentation{}: time_ns, allocations, span_bytes, free_bytes, largest_gap_bytes, ratio
//   bucket{}: start_ns, min_bytes, max_bytes
//   stack[]: level, pc ("0x..."), function, file, line, module (full path)
// docs/analysis.md defines the numbers over time.
std::string render_json(const Report& report, const RenderOptions& options = {});

}  // namespace gmt::analysis
