// The devices table (schema v6): names, UUIDs, capacity and PCI bus of the devices a trace's events name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// A row of the devices table (schema v6): what the process's devices are. Absent fields: not recorded.
struct DeviceInfo {
  int64_t ordinal = -1;
  std::optional<std::string> name;
  std::optional<std::string> uuid;
  std::optional<int64_t> total_bytes;
  std::optional<std::string> pci_bus_id;
};

// "device 0: NVIDIA H200 (GPU-0ff0...)"; "device 0" when the trace does not name it.
std::string describe_device(const std::vector<DeviceInfo>& devices, int64_t ordinal);

// The rows, by ordinal; empty for a trace without the table (before v6, or a process that never named a
// device).
std::vector<DeviceInfo> read_devices(const TraceFile& trace);

}  // namespace gmt::analysis
