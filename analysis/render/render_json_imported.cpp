// The JSON report's devices table and imported memory (docs/analysis.md "Imported memory").
#include "analysis/render/render_json_parts.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;

}  // namespace

Json devices_json(const std::vector<DeviceInfo>& devices) {
  Json list = Json::array();
  for (const DeviceInfo& device : devices) {
    list.push_back(Json{{"ordinal", device.ordinal},
                        {"name", optional_value(device.name)},
                        {"uuid", optional_value(device.uuid)},
                        {"total_bytes", optional_value(device.total_bytes)},
                        {"pci_bus_id", optional_value(device.pci_bus_id)}});
  }
  return list;
}

Json imported_json(const ImportedMemory& imported) {
  Json devices = Json::array();
  for (const ImportedDevice& device : imported.devices) {
    devices.push_back(Json{{"device", device.device},
                           {"peak_bytes", device.peak_bytes},
                           {"peak_time_ns", device.peak_time_ns},
                           {"opens", device.opens},
                           {"open_at_end_bytes", device.open_at_end_bytes}});
  }
  Json left_open = Json::array();
  for (const OpenImportGroup& group : imported.left_open) {
    Json apis = Json::array();
    for (schema::Api api : group.apis) apis.push_back(std::string(schema::to_string(api)));
    left_open.push_back(Json{{"bytes", group.bytes},
                             {"count", group.count},
                             {"apis", std::move(apis)},
                             {"devices", group.devices},
                             {"stack_id", group.stack.id},
                             {"stack_ids", group.stack_ids},
                             {"stack_missing", group.stack.missing},
                             {"stack", call_stack_json(group.stack)}});
  }
  return Json{{"opens", imported.opens},
              {"closes", imported.closes},
              {"peak_bytes", imported.peak_bytes},
              {"peak_time_ns", imported.peak_time_ns},
              {"devices", std::move(devices)},
              {"left_open_handles", imported.left_open_handles},
              {"left_open_bytes", imported.left_open_bytes},
              {"left_open", std::move(left_open)}};
}

}  // namespace gmt::analysis
