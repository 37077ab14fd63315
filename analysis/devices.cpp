#include <algorithm>

#include "analysis/model.h"

namespace gmt::analysis {

// The devices themselves are read by read/devices.h.
std::string describe_device(const std::vector<DeviceInfo>& devices, int64_t ordinal) {
  std::string text = "device " + std::to_string(ordinal);
  auto it = std::find_if(devices.begin(), devices.end(), [ordinal](const DeviceInfo& d) { return d.ordinal == ordinal; });
  if (it == devices.end() || (!it->name && !it->uuid)) return text;
  if (it->name) text += ": " + *it->name;
  if (it->uuid) text += (it->name ? " (" : ": (") + *it->uuid + ")";
  return text;
}

}  // namespace gmt::analysis
