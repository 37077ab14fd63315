#include "analysis/read/trace_info.h"

#include <algorithm>
#include <charconv>

#include "analysis/read/control_marks.h"
#include "analysis/read/trace_tables.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {

std::optional<int64_t> lenient_meta_int(const TraceFile& trace, const char* key) {
  auto text = trace.meta(key);
  if (!text) return std::nullopt;
  int64_t value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

bool meta_flag(const TraceFile& trace, const char* key) { return trace.meta(key) == std::optional<std::string>("1"); }

namespace {

std::optional<TraceInfo::SelfCost> self_cost(const TraceFile& trace, const char* events_key, const char* ns_key) {
  const std::optional<int64_t> events = lenient_meta_int(trace, events_key);
  const std::optional<int64_t> ns = lenient_meta_int(trace, ns_key);
  if (!events || !ns || *events <= 0 || *ns < 0) return std::nullopt;
  return TraceInfo::SelfCost{static_cast<uint64_t>(*events), static_cast<uint64_t>(*ns)};
}

}  // namespace

void read_trace_info(const TraceFile& trace, TraceInfo& info) {
  namespace meta = schema::meta;
  info.path = trace.path();
  info.schema_version = trace.schema_version();
  info.pid = lenient_meta_int(trace, meta::kPid);
  info.command_line = trace.meta(meta::kCommandLine);
  info.hostname = trace.meta(meta::kHostname);
  info.backend = trace.meta(meta::kBackend);
  info.backend_reason = trace.meta(meta::kBackendReason);
  info.backend_note = trace.meta(meta::kBackendNote);
  info.tool_version = trace.meta(meta::kToolVersion);
  info.complete = meta_flag(trace, meta::kComplete);
  info.simulated = meta_flag(trace, meta::kSimulated);
  info.symbolized = meta_flag(trace, meta::kSymbolized);
  info.stop_reason = trace.meta(meta::kStopReason);
  info.recording_pauses =
      static_cast<uint64_t>(std::max<int64_t>(0, lenient_meta_int(trace, meta::kRecordingPauses).value_or(0)));
  info.recording_paused_ns =
      static_cast<uint64_t>(std::max<int64_t>(0, lenient_meta_int(trace, meta::kRecordingPausedNs).value_or(0)));
  info.dropped_events =
      static_cast<uint64_t>(std::max<int64_t>(0, lenient_meta_int(trace, meta::kDroppedEvents).value_or(0)));
  info.control_pause_starts_ns = read_control_marks(trace).pause_starts_ns;
  info.missing_tables = missing_table_notes(trace);
  info.app_exit_status = lenient_meta_int(trace, meta::kAppExitStatus);
  info.app_exit_signal = lenient_meta_int(trace, meta::kAppExitSignal);
  info.events_lost_at_exit = lenient_meta_int(trace, meta::kEventsLostAtExit);
  info.events_after_close = lenient_meta_int(trace, meta::kEventsAfterClose);
  info.frees_after_close =
      static_cast<uint64_t>(std::max<int64_t>(0, lenient_meta_int(trace, meta::kFreesAfterClose).value_or(0)));
  info.self_cost_cuda = self_cost(trace, meta::kSelfCostCudaEvents, meta::kSelfCostCudaNs);
  info.self_cost_block = self_cost(trace, meta::kSelfCostBlockEvents, meta::kSelfCostBlockNs);
  info.block_stack_sample_bytes =
      static_cast<uint64_t>(std::max<int64_t>(0, lenient_meta_int(trace, meta::kBlockStackSampleBytes).value_or(0)));
}

}  // namespace gmt::analysis
