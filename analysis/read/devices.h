// The devices table (schema v6): names, UUIDs, capacity and PCI bus of the devices a trace's events name.
#pragma once

#include <vector>

#include "analysis/model.h"
#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// The rows, by ordinal; empty for a trace without the table (before v6, or a process that never named a
// device).
std::vector<DeviceInfo> read_devices(const TraceFile& trace);

}  // namespace gmt::analysis
