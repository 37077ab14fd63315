// Renderers for other tools: a self-contained HTML page, Chrome trace-event JSON for Perfetto and
// chrome://tracing, and folded stacks for flamegraph.pl and speedscope. Like render.h they only format a
// Report; what they ship is bounded by the Report's own caps (timeline buckets, stacks per moment, --top),
// never by the number of events in the trace.
#pragma once

#include <cstddef>
#include <string>

#include "analysis/model/allocation_slices.h"
#include "analysis/model/diff.h"
#include "analysis/model/report.h"
#include "analysis/model/viewer_data.h"
#include "analysis/render/render.h"

namespace gmt::analysis {

// At most this many failed allocations are embedded in the HTML page and drawn as markers (all of them are
// counted); a trace of a program that retries an allocation in a loop would otherwise grow the page without bound.
inline constexpr size_t kMaxExportedFailures = 500;
// Likewise for NVTX range spans (a training loop pushes a range per step): the earliest are kept.
inline constexpr size_t kMaxExportedRanges = 2000;

// One HTML file that opens offline: inline CSS and JS, the Report's JSON (render_json's shape, cut to
// options.top leak groups and kMaxExportedFailures failures) in a <script type="application/json"> element.
// The script draws the live-bytes timeline of each device as SVG (min/max bands, peak, failures, growth),
// and the tables: leaks with their call stacks, stacks live at each peak, growth, fragmentation, pools,
// failures. Text from the trace is inserted with textContent (and escaped in the server-side header), so a
// symbol such as `operator<<<script>` stays text.
//
// With `viewer` (analysis/model/viewer_data.h), the page also has the interactive viewer: memory over time per device
// with zoom and pan (d3.zoom) down to single allocations, the top call stacks as stacked layers, NVTX ranges as a
// band; a stack panel for a clicked layer, allocation, flamegraph node, block or finding; an icicle of bytes by stack
// (live at the peak, leaked, allocated in total); the heaps' segment map at chosen moments; the findings panel. d3 is
// inlined (assets/vendor), so the page still opens offline.
std::string render_html(const Report& report, const RenderOptions& options = {}, const ViewerData* viewer = nullptr);

// `diff --format html`: one HTML file that opens offline (d3 inlined): the runs, peaks, leaked bytes and regressions
// in a header that reads without the script; both runs' live bytes over time (each report's timeline envelope, times
// from each process start) on one time axis with zoom (#diff-timeline, a path.series per run); the call stacks whose
// leaked bytes are new, gone, grew or shrank (#diff-stacks, the largest changes first, at most 1000), each with its
// user frame and byte change, its full stack in #diff-stack-panel when clicked. Names from the traces are text.
std::string render_diff_html(const TraceDiff& diff, const Report& base, const Report& next);

// Chrome trace-event JSON (the JSON Object Format: {"traceEvents": [...], "displayTimeUnit": "ms"}), times
// in microseconds since the process start. Counter events ("C") for every timeline series (one track for
// the least and one for the most live bytes of each bucket, so that spikes show) and for the pools' last
// sample; instant events ("i") for failed allocations and growth findings; process and thread names ("M"); NVTX
// ranges as slices. With `slices`, each allocation shown there is an async slice ("b"/"e", unique id) on its device's
// process from its allocation to its free (or the end of the trace), args: size, memory kind, api, address, stream,
// the user's frame and the stack; otherData.allocation_slices says how many were shown and what was summed.
std::string render_perfetto(const Report& report, const RenderOptions& options = {},
                            const AllocationSlices* slices = nullptr);

// What a folded-stack profile weighs.
enum class FoldedOf {
  Leaks,  // bytes still live at the end, per leak group (every group of Report::leaks)
  Peak,   // bytes live at each device's peak, per call stack (the top stacks kept), under a "device N" root
};

// One line per call stack: frames outermost first, separated by ';', a space, then the bytes. A frame is
// its function, else "module@0xpc" (the module's file name), else "0xpc". Identical lines are merged.
// ';' in a frame becomes "%3B" and line breaks "%0A"/"%0D", so that every line stays one stack.
std::string render_folded(const Report& report, FoldedOf of);

}  // namespace gmt::analysis
