// The cross-check of run --verify (verify.h) in the text and JSON reports. In the text report it comes right
// under the header: when the backends disagree, that is the first thing to know about every figure below.
#include <fmt/core.h>

#include "analysis/format.h"
#include "analysis/model/verify.h"
#include "analysis/render/render_json_parts.h"
#include "analysis/render/render_text_parts.h"

namespace gmt::analysis {
namespace {

using schema::EventKind;

std::string events_word(uint64_t count) { return count == 1 ? "event" : "events"; }

// "3 allocations", "1 free", "2 failed allocations", "1 vmm_create event".
std::string counted_kind(EventKind kind, uint64_t count) {
  const char* singular = nullptr;
  const char* plural = nullptr;
  switch (kind) {
    case EventKind::Alloc:
      singular = "allocation";
      plural = "allocations";
      break;
    case EventKind::Free:
      singular = "free";
      plural = "frees";
      break;
    case EventKind::AllocFailed:
      singular = "failed allocation";
      plural = "failed allocations";
      break;
    default: return fmt::format("{} {} {}", count, schema::to_string(kind), events_word(count));
  }
  return fmt::format("{} {}", count, count == 1 ? singular : plural);
}

std::string id_list(const std::vector<int64_t>& ids, uint64_t count) {
  std::string list;
  for (int64_t id : ids) list += (list.empty() ? "" : ", ") + std::to_string(id);
  if (count > ids.size()) list += ", ...";
  return list;
}

}  // namespace

void append_cross_check(std::string& out, const Report& report, const RenderOptions& options) {
  if (!report.cross_check) return;
  const CrossCheck& check = *report.cross_check;
  if (!check.ran()) {
    out += fmt::format("\nCross-check (run --verify): did not run: {}\n",
                       check.unavailable.value_or("the trace does not say why"));
    out += fmt::format("  Nothing was compared: the figures below come from {} alone.\n", check.counting_backend);
    return;
  }
  const std::string& counting = check.counting_backend;
  const std::string& checking = check.checking_backend;
  if (check.disagreements() == 0) {
    out += fmt::format("\nCross-check (run --verify): {} and {} agree: {} {} matched one to one, none seen by only "
                       "one backend\n",
                       counting, checking, check.matched, events_word(check.matched));
  } else {
    out += fmt::format("\nCross-check (run --verify): {} {} seen by only one backend\n", check.disagreements(),
                       events_word(check.disagreements()));
    out += fmt::format("  {} counted, {} recorded every event too: {} matched one to one; only {} saw {}, only {} "
                       "saw {}\n",
                       counting, checking, check.matched, counting, check.only_counting, checking, check.only_checking);
    out +=
        fmt::format("  The figures below come from {}: what only {} saw is missing from them.\n", counting, checking);
  }
  if (check.named_differently > 0) {
    out += fmt::format("  {} matched {} named differently (a runtime call only one backend could name)\n",
                       check.named_differently, check.named_differently == 1 ? "pair is" : "pairs are");
  }
  if (check.on_other_device > 0) {
    out += fmt::format("  {} matched {} a different device on each side\n", check.on_other_device,
                       check.on_other_device == 1 ? "pair names" : "pairs name");
  }
  const size_t shown = std::min(options.top, check.groups.size());
  for (size_t i = 0; i < shown; ++i) {
    const Disagreement& group = check.groups[i];
    out += fmt::format(
        "\n  only {} saw: {} ({}, {}){}, first at {} (event{} {})\n", group.seen_by_counting ? counting : checking,
        counted_kind(group.kind, group.count), schema::to_string(group.api), schema::to_string(group.memory_kind),
        group.bytes > 0 ? ", " + format_bytes_exact(group.bytes) : std::string(), format_duration(group.first_time_ns),
        group.count == 1 ? "" : "s", id_list(group.event_ids, group.count));
    append_call_stack(out, group.stack, options);
  }
  if (shown < check.groups.size()) {
    out += fmt::format("\n  ... {} more groups of disagreements (--format json lists them all)\n",
                       check.groups.size() - shown);
  }
}

nlohmann::ordered_json cross_check_json(const Report& report) {
  using Json = nlohmann::ordered_json;
  if (!report.cross_check) return nullptr;
  const CrossCheck& check = *report.cross_check;
  Json groups = Json::array();
  for (const Disagreement& group : check.groups) {
    groups.push_back(Json{{"seen_by", group.seen_by_counting ? check.counting_backend : check.checking_backend},
                          {"missed_by", group.seen_by_counting ? check.checking_backend : check.counting_backend},
                          {"kind", std::string(schema::to_string(group.kind))},
                          {"api", std::string(schema::to_string(group.api))},
                          {"memory_kind", std::string(schema::to_string(group.memory_kind))},
                          {"count", group.count},
                          {"bytes", group.bytes},
                          {"first_time_ns", group.first_time_ns},
                          {"event_ids", group.event_ids},
                          {"stack_id", group.stack.id},
                          {"stack_missing", group.stack.missing},
                          {"stack", call_stack_json(group.stack)}});
  }
  return Json{{"ran", check.ran()},
              {"counting_backend", check.counting_backend},
              {"checking_backend", check.ran() ? Json(check.checking_backend) : Json(nullptr)},
              {"unavailable", optional_value(check.unavailable)},
              {"counting_events", check.counting_events},
              {"checking_events", check.checking_events},
              {"matched", check.matched},
              {"named_differently", check.named_differently},
              {"on_other_device", check.on_other_device},
              {"disagreements", check.disagreements()},
              {"only_counting", check.only_counting},
              {"only_checking", check.only_checking},
              {"groups", std::move(groups)}};
}

}  // namespace gmt::analysis
