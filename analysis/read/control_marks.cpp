// See control_marks.h.
#include "analysis/read/control_marks.h"

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

ControlMarks read_control_marks(const TraceFile& trace) {
  ControlMarks marks;
  if (!trace.has_table("marks") || !trace.has_table("strings")) return marks;
  try {
    Statement rows(trace,
                   "SELECT n.text, m.time_ns FROM marks m JOIN strings n ON n.id = m.name_id JOIN strings d ON d.id = "
                   "m.domain_id WHERE d.text = 'gpumemtrace' ORDER BY m.time_ns, m.id");
    while (rows.step()) {
      const std::string name = rows.column_text(0).value_or("");
      const int64_t time_ns = rows.column_int(1);
      if (name == "pause") {
        marks.pause_starts_ns.push_back(time_ns);
      } else if (name == "resume") {
        marks.resumes_ns.push_back(time_ns);
      } else if (name.rfind("snapshot:", 0) == 0) {
        marks.snapshots.push_back({name.substr(9), time_ns});
      }
    }
  } catch (const TraceError&) {
    // Unreadable marks (a damaged trace): no control marks, as in a trace without them; the report says what is
    // damaged where it reads the rest.
  }
  return marks;
}

}  // namespace gmt::analysis
