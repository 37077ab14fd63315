#include "analysis/read/torch_actions.h"

#include <algorithm>
#include <cstdlib>

#include "schema/trace_schema.h"

namespace gmt::analysis {
namespace {

using schema::Api;
using schema::EventKind;

constexpr const char* kActionsSql =
    "SELECT id, kind, api, address, size, stream, handle FROM events WHERE source = 4 AND (device = ?1 OR "
    "device = -1) ORDER BY id";

std::optional<TorchActionKind> action_kind(int64_t kind, int64_t api) {
  switch (static_cast<EventKind>(kind)) {
    case EventKind::Alloc: return TorchActionKind::Alloc;
    case EventKind::Free: return TorchActionKind::FreeCompleted;
    case EventKind::FreeRequested: return TorchActionKind::FreeRequested;
    case EventKind::SegmentAlloc:
      return static_cast<Api>(api) == Api::torchSegmentMap ? TorchActionKind::SegmentMap
                                                           : TorchActionKind::SegmentAlloc;
    case EventKind::SegmentFree:
      return static_cast<Api>(api) == Api::torchSegmentUnmap ? TorchActionKind::SegmentUnmap
                                                             : TorchActionKind::SegmentFree;
    case EventKind::AllocFailed: return TorchActionKind::Oom;
    case EventKind::AllocatorCall:
      switch (static_cast<Api>(api)) {
        case Api::torchEmptyCache: return TorchActionKind::EmptyCache;
        case Api::torchSetAllocatorSettings: return TorchActionKind::SetSettings;
        case Api::torchSetMemoryFraction: return TorchActionKind::SetFraction;
        default: return std::nullopt;
      }
    default: return std::nullopt;  // autograd calls, kinds of later versions
  }
}

}  // namespace

TorchActionReader::TorchActionReader(const TraceFile& trace, int64_t device)
    : statement_(trace, kActionsSql), schema_version_(trace.schema_version()) {
  statement_.bind(1, device);
}

bool TorchActionReader::step() {
  while (statement_.step()) {
    std::optional<TorchActionKind> kind = action_kind(statement_.column_int(1), statement_.column_int(2));
    if (!kind) continue;
    action_.event_id = statement_.column_int(0);
    action_.kind = *kind;
    action_.address = static_cast<uint64_t>(statement_.column_int(3));
    action_.size = static_cast<uint64_t>(statement_.column_int(4));
    action_.stream = static_cast<uint64_t>(statement_.column_int(5));
    action_.value = statement_.column_int(6);
    if (*kind == TorchActionKind::Oom) {
      // v10 stores the device's free bytes in the OOM's address; older traces store 0 there.
      action_.value = schema_version_ >= 10 ? static_cast<int64_t>(action_.address) : -1;
      action_.address = 0;
    } else if (*kind == TorchActionKind::SetFraction) {
      action_.value = static_cast<int64_t>(action_.size);
    }
    return true;
  }
  return false;
}

TorchReplayFacts read_torch_replay_facts(const TraceFile& trace) {
  namespace meta = schema::meta;
  TorchReplayFacts facts;
  // The devices with blocks: of those meta devices names, the ones with a block (found at once where there are
  // any); a scan for traces without the key.
  std::vector<int64_t> named;
  const std::string listed = trace.meta(meta::kDevices).value_or("");
  for (size_t start = 0; start < listed.size();) {
    const size_t comma = std::min(listed.find(',', start), listed.size());
    named.push_back(std::strtoll(listed.substr(start, comma - start).c_str(), nullptr, 10));
    start = comma + 1;
  }
  if (named.empty()) {
    Statement devices(trace, "SELECT DISTINCT device FROM events WHERE source = 4 AND kind = 1 ORDER BY device");
    while (devices.step()) facts.devices.push_back(devices.column_int(0));
  } else {
    Statement has_blocks(trace, "SELECT 1 FROM events WHERE source = 4 AND kind = 1 AND device = ?1 LIMIT 1");
    for (int64_t device : named) {
      has_blocks.reset();
      has_blocks.bind(1, device);
      if (has_blocks.step()) facts.devices.push_back(device);
    }
  }
  Statement oom(trace, "SELECT device FROM events WHERE source = 4 AND kind = 3 ORDER BY id LIMIT 1");
  if (oom.step()) facts.first_oom_device = oom.column_int(0);
  facts.tensor_blocks = trace.meta(meta::kTensorBlocks).value_or("") == "1" && !facts.devices.empty();
  facts.tensor_blocks_note = trace.meta(meta::kTensorBlocksNote);
  facts.dropped_events =
      trace.meta_int(meta::kDroppedEvents).value_or(0) + trace.meta_int(meta::kEventsLostAtExit).value_or(0);
  facts.ring_overruns = trace.meta_int(meta::kTensorBlocksOverruns).value_or(0);
  facts.alloc_conf = trace.meta(meta::kTorchAllocConf);
  facts.alloc_conf_variable = trace.meta(meta::kTorchAllocConfVariable);
  facts.torch_version = trace.meta(meta::kTorchVersion);
  facts.torch_git_version = trace.meta(meta::kTorchGitVersion);
  const std::string note = facts.tensor_blocks_note.value_or("");
  facts.cuda_malloc_async = note.find("cudaMallocAsync") != std::string::npos;
  if (trace.has_table("allocator_stats")) {
    Statement async(trace, "SELECT 1 FROM allocator_stats WHERE allocator = 3 LIMIT 1");
    if (async.step()) facts.cuda_malloc_async = true;
  }
  return facts;
}

std::optional<std::string> read_settings_call(const TraceFile& trace, int64_t n) {
  return trace.meta(std::string(schema::meta::kTorchAllocConfCallPrefix) + std::to_string(n));
}

std::optional<int64_t> cuda_free_before(const TraceFile& trace, int64_t device, int64_t event_id) {
  if (!trace.has_table("alloc_failures")) return std::nullopt;
  Statement statement(trace,
                      "SELECT f.device_free FROM events e JOIN alloc_failures f ON f.event_id = e.id WHERE e.id <= ?1 "
                      "AND e.device = ?2 AND e.source != 4 AND f.device_free IS NOT NULL ORDER BY e.id DESC LIMIT 1");
  statement.bind(1, event_id);
  statement.bind(2, device);
  if (!statement.step()) return std::nullopt;
  return statement.column_int(0);
}

}  // namespace gmt::analysis
