#include "analysis/read/ranges.h"

namespace gmt::analysis {

void read_ranges(const TraceFile& trace, const std::function<void(const RangeRow&)>& each) {
  Statement rows(trace, trace.has_table("strings")
                            ? "SELECT r.id, r.thread_id, r.start_ns, r.end_ns, r.depth, d.text, n.text FROM ranges r "
                              "LEFT JOIN strings d ON d.id = r.domain_id LEFT JOIN strings n ON n.id = r.name_id "
                              "ORDER BY r.start_ns, r.id"
                            : "SELECT r.id, r.thread_id, r.start_ns, r.end_ns, r.depth, NULL, NULL FROM ranges r "
                              "ORDER BY r.start_ns, r.id");
  RangeRow row;
  while (rows.step()) {
    row.id = rows.column_int(0);
    row.thread_id = rows.column_int(1);
    row.start_ns = rows.column_int(2);
    row.end_ns = rows.column_is_null(3) ? std::nullopt : std::optional<int64_t>(rows.column_int(3));
    row.depth = rows.column_int(4);
    row.domain = rows.column_text(5).value_or("");
    row.name = rows.column_text(6).value_or("");
    each(row);
  }
}

}  // namespace gmt::analysis
