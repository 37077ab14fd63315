// See control_marks.h.
#include "analysis/read/control_marks.h"

#include <sqlite3.h>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

ControlMarks read_control_marks(const TraceFile& trace) {
  ControlMarks marks;
  if (!trace.has_table("marks") || !trace.has_table("strings")) return marks;
  sqlite3_stmt* statement = nullptr;
  const char* sql =
      "SELECT n.text, m.time_ns FROM marks m JOIN strings n ON n.id = m.name_id JOIN strings d ON d.id = m.domain_id "
      "WHERE d.text = 'gpumemtrace' ORDER BY m.time_ns, m.id";
  if (sqlite3_prepare_v2(trace.db(), sql, -1, &statement, nullptr) != SQLITE_OK) {
    sqlite3_finalize(statement);
    return marks;
  }
  while (sqlite3_step(statement) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    const std::string name = text ? text : "";
    const int64_t time_ns = sqlite3_column_int64(statement, 1);
    if (name == "pause") {
      marks.pause_starts_ns.push_back(time_ns);
    } else if (name.rfind("snapshot:", 0) == 0) {
      marks.snapshots.push_back({name.substr(9), time_ns});
    }
  }
  sqlite3_finalize(statement);
  return marks;
}

}  // namespace gmt::analysis
