#include "analysis/read/cross_check.h"

namespace gmt::analysis {

namespace backend_names = schema::backend_names;

std::optional<schema::Source> source_of_backend(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  if (*name == backend_names::kCupti) return schema::Source::Cupti;
  if (*name == backend_names::kHooks) return schema::Source::DriverHook;
  if (*name == backend_names::kRuntime) return schema::Source::RuntimeHook;
  return std::nullopt;
}

std::optional<schema::Source> cross_check_source(const TraceFile& trace) {
  const std::optional<schema::Source> checking = source_of_backend(trace.meta(schema::meta::kVerifyBackend));
  if (!checking || checking == source_of_backend(trace.meta(schema::meta::kBackend))) return std::nullopt;
  return checking;
}

std::vector<CheckedEvent> read_backend_events(const TraceFile& trace, schema::Source counting,
                                              schema::Source checking) {
  Statement rows(trace,
                 "SELECT id, time_ns, thread_id, kind, memory_kind, api, device, address, size, handle, stack_id, "
                 "source FROM events WHERE source IN (?1, ?2) ORDER BY id");
  rows.bind(1, static_cast<int64_t>(counting));
  rows.bind(2, static_cast<int64_t>(checking));
  std::vector<CheckedEvent> events;
  while (rows.step()) {
    CheckedEvent e;
    e.id = rows.column_int(0);
    e.time_ns = rows.column_int(1);
    e.thread_id = rows.column_int(2);
    e.kind = rows.column_int(3);
    e.memory_kind = rows.column_int(4);
    e.api = rows.column_int(5);
    e.device = rows.column_int(6);
    e.address = static_cast<uint64_t>(rows.column_int(7));
    e.size = static_cast<uint64_t>(rows.column_int(8));
    e.handle = static_cast<uint64_t>(rows.column_int(9));
    e.stack_id = rows.column_int(10);
    e.source = rows.column_int(11);
    e.counting = e.source == static_cast<int64_t>(counting);
    events.push_back(e);
  }
  return events;
}

}  // namespace gmt::analysis
