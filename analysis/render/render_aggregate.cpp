// What the renderers say about an aggregate trace (`run --aggregate`, analysis/model/aggregate_report.h).
#include <fmt/core.h>

#include "analysis/model/aggregate_report.h"
#include "analysis/render/render_json_parts.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {

nlohmann::ordered_json aggregate_json(const Report& report) {
  if (!report.aggregate) return nullptr;
  const AggregateSummary& a = *report.aggregate;
  return nlohmann::ordered_json{{"window_ns", a.window_ns},
                                {"windows", a.windows},
                                {"events_seen", a.events_seen},
                                {"events_kept", a.events_kept},
                                {"synchronize_events", a.synchronize_events},
                                {"failures_with_context", a.failures_with_context},
                                {"failures_without_context", a.failures_without_context},
                                {"note", a.note()}};
}

void append_aggregate_note(std::string& out, const Report& report) {
  if (!report.aggregate) return;
  out += fmt::format("  mode       {}\n", report.aggregate->note());
  if (report.aggregate->failures_without_context > 0) {
    out += fmt::format("  note       {} failed allocation(s) after the first 64 keep their own row only, not the "
                       "memory live then\n",
                       report.aggregate->failures_without_context);
  }
}

}  // namespace gmt::analysis
