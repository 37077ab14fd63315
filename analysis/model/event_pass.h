// One pass over the events of one set (read/events.h EventSet) in time order: each event kind has its handler
// (event_pass.cpp), every change of live memory goes to the trackers (live bytes, over time, pools, ranges, heaps,
// breakdown), and at the end what is still live becomes the leaks. analyze.cpp runs it once per set.
#pragma once

#include <cstddef>

#include "analysis/model/options.h"
#include "analysis/model/report.h"
#include "analysis/read/events.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

struct HeapPass;  // heaps.h: what the CudaLevel pass hands the AppLevel pass

// The Report of one set's events, read in `order` (read/ordered_events.h says how `order` and `window` obtain time
// order). In the TensorBlocks pass, blocks are accounted as device memory (so that live bytes, peaks, growth and
// ranges treat them exactly as device memory); tensor_blocks.cpp names them again. `heaps`: filled by the CudaLevel
// pass, read by the AppLevel pass; nullptr for TensorBlocks. Throws EventsOutOfOrder when the window was too small.
Report run_event_pass(const TraceFile& trace, const AnalyzeOptions& options, EventOrder order, size_t window,
                      EventSet set, HeapPass* heaps);

}  // namespace gmt::analysis
