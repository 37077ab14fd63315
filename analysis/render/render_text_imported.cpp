// The text report's device names and its section on imported memory (docs/analysis.md "Imported memory").
#include <fmt/core.h>

#include <algorithm>

#include "analysis/format.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {

void append_devices(std::string& out, const Report& report) {
  for (const DeviceInfo& device : report.devices) {
    out += fmt::format("  {}", describe_device(report.devices, device.ordinal));
    if (device.total_bytes) out += fmt::format(", {}", format_bytes(static_cast<uint64_t>(*device.total_bytes)));
    if (device.pci_bus_id) out += fmt::format(", PCI {}", *device.pci_bus_id);
    out += "\n";
  }
}

void append_imported(std::string& out, const Report& report, const RenderOptions& options) {
  const ImportedMemory& imported = report.imported;
  if (!imported.any()) return;
  out += fmt::format(
      "\nImported memory (other processes' memory opened here: owned by them, in none of the totals above)\n");
  out += fmt::format("  {} opened, {} closed; peak {} at {}\n", imported.opens, imported.closes,
                     format_bytes_exact(imported.peak_bytes), format_duration(imported.peak_time_ns));
  for (const ImportedDevice& device : imported.devices) {
    out += fmt::format("  {}: peak {} at {}, {} open at the end\n", describe_device(report.devices, device.device),
                       format_bytes_exact(device.peak_bytes), format_duration(device.peak_time_ns),
                       format_bytes_exact(device.open_at_end_bytes));
  }
  if (imported.left_open.empty()) return;
  out += fmt::format("\nIPC handles left open: {} {} ({}): they hold no memory of this process, but should be closed\n",
                     imported.left_open_handles, imported.left_open_handles == 1 ? "handle" : "handles",
                     format_bytes_exact(imported.left_open_bytes));
  const size_t shown = std::min(options.top, imported.left_open.size());
  for (size_t i = 0; i < shown; ++i) {
    const OpenImportGroup& group = imported.left_open[i];
    std::string apis;
    for (schema::Api api : group.apis) apis += (apis.empty() ? "" : ", ") + std::string(schema::to_string(api));
    std::string devices;
    for (int64_t device : group.devices) devices += (devices.empty() ? "" : ", ") + std::to_string(device);
    out += fmt::format("\n#{} {} in {} {} ({}) on device {}\n", i + 1, format_bytes(group.bytes), group.count,
                       group.count == 1 ? "handle" : "handles", apis, devices);
    append_call_stack(out, group.stack, options);
  }
  if (shown < imported.left_open.size()) {
    out += fmt::format("\n... {} more call stacks with handles left open (--format json lists them all)\n",
                       imported.left_open.size() - shown);
  }
}

}  // namespace gmt::analysis
