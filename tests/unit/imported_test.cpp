// Memory imported from other processes (schema v6, docs/analysis.md "Imported memory"): IPC handles and
// mappings of imported VMM handles are reported apart, never in the process's totals, peaks or leaks; and the
// devices table names the devices. Every expected number is worked out in the comments.
#include <gtest/gtest.h>

#include "analysis/model/analyze.h"
#include "analysis/model/merge.h"
#include "analysis/model/report.h"
#include "analysis/render/render.h"
#include "trace_builder.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;
using schema::MemoryKind;
using test_support::EventRow;
using test_support::TraceBuilder;

constexpr int64_t kMiB = 1024 * 1024;

Report analyze(TraceBuilder& builder) {
  TraceFile trace = builder.open();
  return analyze_trace(trace);
}

void ipc_open(TraceBuilder& b, int64_t t, int64_t address, int64_t size, int64_t device, int64_t stack) {
  b.alloc(t, address, size, stack, Api::cudaIpcOpenMemHandle, MemoryKind::IpcImported, device);
}

void ipc_close(TraceBuilder& b, int64_t t, int64_t address) {
  b.free(t, address, Api::cudaIpcCloseMemHandle, MemoryKind::IpcImported);
}

TEST(ImportedTest, IpcHandlesAreCountedApartAndNeverLeak) {
  TraceBuilder b;
  int64_t own = b.stack({0x401000});
  int64_t closed = b.stack({0x402000});
  int64_t kept = b.stack({0x403000});
  b.alloc(10, 0x1000, 1 * kMiB, own, Api::cudaMalloc, MemoryKind::Device, 1);  // the process's own memory
  ipc_open(b, 20, 0x7f0000000000, 6 * kMiB, 0, closed);                        // exporter's device 0
  ipc_open(b, 30, 0x7f0001000000, 2 * kMiB, 0, kept);                          // imported peak 8 MiB at 30
  ipc_close(b, 40, 0x7f0000000000);
  b.free(50, 0x1000);
  Report r = analyze(b);

  // The process's own figures: only the 1 MiB on device 1.
  EXPECT_EQ(r.totals.allocations, 1u);
  EXPECT_EQ(r.totals.allocated_bytes, static_cast<uint64_t>(1 * kMiB));
  EXPECT_EQ(r.totals.frees, 1u);
  EXPECT_EQ(r.totals.peak_bytes, static_cast<uint64_t>(1 * kMiB));
  EXPECT_EQ(r.totals.leaked_bytes, 0u);
  EXPECT_EQ(r.totals.unmatched_frees, 0u);
  EXPECT_EQ(r.totals.inconsistencies, 0u);
  EXPECT_TRUE(r.leaks.empty());
  ASSERT_EQ(r.peaks.size(), 1u);
  EXPECT_EQ(r.peaks[0].device, 1);
  EXPECT_EQ(r.timeline.series.size(), 1u);  // no series for the imported memory

  // The imported memory: 6 + 2 MiB at 30 ns on device 0; 2 MiB left open, opened at `kept`.
  const ImportedMemory& im = r.imported;
  EXPECT_EQ(im.opens, 2u);
  EXPECT_EQ(im.closes, 1u);
  EXPECT_EQ(im.peak_bytes, static_cast<uint64_t>(8 * kMiB));
  EXPECT_EQ(im.peak_time_ns, 30);
  ASSERT_EQ(im.devices.size(), 1u);
  EXPECT_EQ(im.devices[0].device, 0);
  EXPECT_EQ(im.devices[0].peak_bytes, static_cast<uint64_t>(8 * kMiB));
  EXPECT_EQ(im.devices[0].opens, 2u);
  EXPECT_EQ(im.devices[0].open_at_end_bytes, static_cast<uint64_t>(2 * kMiB));
  EXPECT_EQ(im.left_open_handles, 1u);
  EXPECT_EQ(im.left_open_bytes, static_cast<uint64_t>(2 * kMiB));
  ASSERT_EQ(im.left_open.size(), 1u);
  EXPECT_EQ(im.left_open[0].stack.id, kept);
  EXPECT_EQ(im.left_open[0].count, 1u);
  EXPECT_EQ(im.left_open[0].apis, std::vector<Api>{Api::cudaIpcOpenMemHandle});
  EXPECT_EQ(im.left_open[0].devices, std::vector<int64_t>{0});
}

TEST(ImportedTest, MappingsOfImportedVmmHandlesAreImportedNotPhysical) {
  TraceBuilder b;
  int64_t import_stack = b.stack({0x404000});
  auto vmm = [&](int64_t t, EventKind kind, int64_t address, int64_t size, int64_t handle, int64_t device,
                 int64_t stack = 0, Api api = Api::cuMemMap) {
    EventRow row;
    row.time_ns = t;
    row.kind = kind;
    row.api = static_cast<int64_t>(api);
    row.memory_kind = static_cast<int64_t>(kind == EventKind::VmmCreate   ? MemoryKind::VmmPhysical
                                           : kind == EventKind::VmmImport ? MemoryKind::IpcImported
                                                                          : MemoryKind::None);
    row.device = device;
    row.address = address;
    row.size = size;
    row.handle = handle;
    row.stack_id = stack;
    b.event(row);
  };
  // Own physical memory: 2 MiB on device 0, mapped, unmapped, released.
  vmm(1, EventKind::VmmCreate, 0, 2 * kMiB, 11, 0, 0, Api::cuMemCreate);
  vmm(2, EventKind::VmmMap, 0x700000000, 2 * kMiB, 11, 0);
  // A peer's handle (device 1): imported, mapped twice (4 + 4 MiB), one mapping undone, never released.
  vmm(3, EventKind::VmmImport, 0, 0, 21, 1, import_stack, Api::cuMemImportFromShareableHandle);
  vmm(4, EventKind::VmmMap, 0x710000000, 4 * kMiB, 21, 0);  // the mapping's device is the importer's context
  vmm(5, EventKind::VmmMap, 0x710400000, 4 * kMiB, 21, 0);  // imported peak: 8 MiB at 5
  vmm(6, EventKind::VmmUnmap, 0x710000000, 4 * kMiB, 0, 0);
  vmm(7, EventKind::VmmUnmap, 0x700000000, 2 * kMiB, 0, 0);
  vmm(8, EventKind::VmmRelease, 0, 0, 11, 0, 0, Api::cuMemRelease);
  Report r = analyze(b);

  EXPECT_EQ(r.peak_by_kind.vmm_physical, static_cast<uint64_t>(2 * kMiB));
  EXPECT_EQ(r.totals.peak_bytes, static_cast<uint64_t>(2 * kMiB));
  EXPECT_EQ(r.totals.allocations, 1u);
  EXPECT_EQ(r.totals.leaked_bytes, 0u);
  EXPECT_EQ(r.totals.inconsistencies, 0u);  // the imported mappings are known, not "mapping of nothing"
  EXPECT_TRUE(r.leaks.empty());

  const ImportedMemory& im = r.imported;
  EXPECT_EQ(im.opens, 1u);
  EXPECT_EQ(im.closes, 0u);
  EXPECT_EQ(im.peak_bytes, static_cast<uint64_t>(8 * kMiB));
  EXPECT_EQ(im.peak_time_ns, 5);
  ASSERT_EQ(im.devices.size(), 1u);
  EXPECT_EQ(im.devices[0].device, 1);  // where the memory lives, from the import
  EXPECT_EQ(im.devices[0].open_at_end_bytes, static_cast<uint64_t>(4 * kMiB));
  ASSERT_EQ(im.left_open.size(), 1u);
  EXPECT_EQ(im.left_open[0].stack.id, import_stack);
  EXPECT_EQ(im.left_open[0].bytes, static_cast<uint64_t>(4 * kMiB));
  EXPECT_EQ(im.left_open[0].apis, std::vector<Api>{Api::cuMemImportFromShareableHandle});
}

TEST(ImportedTest, ReleasedImportedHandleIsNotLeftOpen) {
  TraceBuilder b;
  EventRow import;
  import.time_ns = 1;
  import.kind = EventKind::VmmImport;
  import.api = static_cast<int64_t>(Api::cuMemImportFromShareableHandle);
  import.memory_kind = static_cast<int64_t>(MemoryKind::IpcImported);
  import.handle = 31;
  b.event(import);
  EventRow release;
  release.time_ns = 2;
  release.kind = EventKind::VmmRelease;
  release.api = static_cast<int64_t>(Api::cuMemRelease);
  release.memory_kind = static_cast<int64_t>(MemoryKind::None);
  release.handle = 31;
  b.event(release);
  Report r = analyze(b);
  EXPECT_EQ(r.imported.opens, 1u);
  EXPECT_EQ(r.imported.closes, 1u);
  EXPECT_EQ(r.imported.left_open_handles, 0u);
  EXPECT_EQ(r.totals.unmatched_frees, 0u);  // the release is the import's, not a free of nothing
}

TEST(ImportedTest, DevicesTableNamesDevicesInReports) {
  TraceBuilder b;
  b.exec("INSERT INTO devices(ordinal, name, uuid, total_bytes, pci_bus_id) VALUES "
         "(0, 'NVIDIA H200', 'GPU-0ff0aa11-2233-4455-6677-8899aabbccdd', 150754820096, '0000:19:00.0'), "
         "(1, NULL, NULL, NULL, NULL)");
  ipc_open(b, 10, 0x7f0000000000, 4 * kMiB, 0, 0);
  Report r = analyze(b);
  ASSERT_EQ(r.devices.size(), 2u);
  EXPECT_EQ(r.devices[0].name, "NVIDIA H200");
  EXPECT_EQ(r.devices[0].total_bytes, 150754820096);
  EXPECT_FALSE(r.devices[1].name.has_value());
  EXPECT_EQ(describe_device(r.devices, 0), "device 0: NVIDIA H200 (GPU-0ff0aa11-2233-4455-6677-8899aabbccdd)");
  EXPECT_EQ(describe_device(r.devices, 1), "device 1");
  EXPECT_EQ(describe_device(r.devices, 7), "device 7");

  const std::string text = render_text(r);
  EXPECT_NE(text.find("  device 0: NVIDIA H200 (GPU-0ff0aa11-2233-4455-6677-8899aabbccdd), 140.40 GiB, PCI "
                      "0000:19:00.0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("IPC handles left open: 1 handle (4.00 MiB (4194304 B))"), std::string::npos) << text;
  const std::string json = render_json(r);
  EXPECT_NE(json.find("\"uuid\": \"GPU-0ff0aa11-2233-4455-6677-8899aabbccdd\""), std::string::npos);
  EXPECT_NE(json.find("\"left_open_bytes\": 4194304"), std::string::npos);

  TraceFile trace = TraceFile::open(b.path());
  ProcessSummary p = summarize_process(trace, r);
  EXPECT_EQ(p.imported_peak_bytes, static_cast<uint64_t>(4 * kMiB));
  EXPECT_EQ(p.imported_left_open_handles, 1u);
  EXPECT_EQ(p.peak_bytes, 0u);
  ASSERT_EQ(p.device_info.size(), 2u);
}

TEST(ImportedTest, TracesWithoutTheDevicesTableStillReport) {
  TraceBuilder b;
  b.exec("DROP TABLE devices");
  b.alloc(10, 0x1000, kMiB);
  Report r = analyze(b);
  EXPECT_TRUE(r.devices.empty());
  EXPECT_FALSE(r.imported.any());
  EXPECT_EQ(render_text(r).find("Imported memory"), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis

namespace gmt::analysis {
namespace {

// With a filter, "N of M allocations analyzed" counts the process's own allocations only: IPC opens are
// filtered like them (the device filter drops the one on device 1) but counted in neither N nor M.
TEST(ImportedTest, FilterSummaryCountsOwnAllocationsOnly) {
  TraceBuilder b;
  b.alloc(10, 0x1000, 1 * kMiB, 0, Api::cudaMalloc, MemoryKind::Device, 0);
  b.alloc(15, 0x2000, 1 * kMiB, 0, Api::cudaMalloc, MemoryKind::Device, 1);
  ipc_open(b, 20, 0x7f0000000000, 6 * kMiB, 0, 0);
  ipc_open(b, 30, 0x7f0001000000, 2 * kMiB, 1, 0);
  TraceFile trace = b.open();
  AnalyzeOptions options;
  options.filters.device = 0;
  Report r = analyze_trace(trace, options);
  EXPECT_EQ(r.filters.allocations_seen, 2u);
  EXPECT_EQ(r.filters.allocations_matched, 1u);
  EXPECT_EQ(r.totals.allocations, 1u);
  EXPECT_EQ(r.totals.leaked_bytes, static_cast<uint64_t>(1 * kMiB));
  EXPECT_EQ(r.imported.opens, 1u);  // device 1's open is filtered out
  EXPECT_EQ(r.imported.peak_bytes, static_cast<uint64_t>(6 * kMiB));
  EXPECT_NE(render_text(r).find("filters    --device 0 (1 of 2 allocations analyzed)"), std::string::npos);
}

}  // namespace
}  // namespace gmt::analysis
