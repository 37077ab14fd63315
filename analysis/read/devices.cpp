#include "analysis/read/devices.h"

#include <algorithm>
#include <string>

namespace gmt::analysis {

std::vector<DeviceInfo> read_devices(const TraceFile& trace) {
  std::vector<DeviceInfo> devices;
  if (!trace.has_table("devices")) return devices;
  Statement rows(trace, "SELECT ordinal, name, uuid, total_bytes, pci_bus_id FROM devices ORDER BY ordinal");
  while (rows.step()) {
    DeviceInfo device;
    device.ordinal = rows.column_int(0);
    device.name = rows.column_text(1);
    device.uuid = rows.column_text(2);
    if (!rows.column_is_null(3)) device.total_bytes = rows.column_int(3);
    device.pci_bus_id = rows.column_text(4);
    devices.push_back(std::move(device));
  }
  return devices;
}

std::string describe_device(const std::vector<DeviceInfo>& devices, int64_t ordinal) {
  std::string text = "device " + std::to_string(ordinal);
  auto it =
      std::find_if(devices.begin(), devices.end(), [ordinal](const DeviceInfo& d) { return d.ordinal == ordinal; });
  if (it == devices.end() || (!it->name && !it->uuid)) return text;
  if (it->name) text += ": " + *it->name;
  if (it->uuid) text += (it->name ? " (" : ": (") + *it->uuid + ")";
  return text;
}

}  // namespace gmt::analysis
