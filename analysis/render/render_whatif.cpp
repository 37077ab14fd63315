#include "analysis/render/render_whatif.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "analysis/format.h"

namespace gmt::analysis {
namespace {

using Json = nlohmann::ordered_json;
using replay::ReplayResult;
using replay::SettingRow;
using replay::WhatIfReport;

// The row's verdict on the first recorded OOM: "yes", "no", or "-" when the replay stopped before it.
std::string oom_verdict(const ReplayResult& r, int64_t oom_event) {
  for (const replay::OomVerdict& v : r.ooms) {
    if (v.event_id == oom_event) return v.replayed_oom ? "yes" : "no";
  }
  return "-";
}

std::string predicted(const ReplayResult& r) {
  if (!r.divergence_event) return "to the end";
  return fmt::format("to event {}: {}", *r.divergence_event, r.divergence);
}

struct Line {
  std::string setting, peak, allocated, gap, inactive, segments, oom, until;
};

Line row_line(const std::string& label, const ReplayResult& r, const WhatIfReport& report) {
  Line line;
  line.setting = label;
  line.peak = format_bytes(r.peak_reserved);
  line.allocated = format_bytes(r.allocated_at_peak);
  const uint64_t gap = r.peak_reserved - std::min(r.peak_reserved, r.allocated_at_peak);
  line.gap = r.peak_reserved ? fmt::format("{} ({:.1f}%)", format_bytes(gap),
                                           100.0 * static_cast<double>(gap) / static_cast<double>(r.peak_reserved))
                             : "0 B";
  line.inactive = format_bytes(r.inactive_split_at_peak);
  line.segments = std::to_string(r.segments_at_peak);
  const auto& first_oom = report.self_check.recorded.first_oom_event;
  line.oom = first_oom ? oom_verdict(r, *first_oom) : (r.new_oom ? "new OOM" : "no");
  line.until = predicted(r);
  return line;
}

}  // namespace

std::string render_whatif_text(const WhatIfReport& report) {
  const ReplayResult& self = report.self_check;
  const replay::RecordedFigures& rec = self.recorded;
  std::string out = fmt::format("gpumemtrace whatif: {} (device {}", report.trace_path, report.device);
  if (report.torch_version) out += ", torch " + *report.torch_version;
  if (report.torch_git_version) out += " git " + report.torch_git_version->substr(0, 12);
  out += ")\n";
  out += fmt::format("Policy: PyTorch's native caching allocator as in {}; the self-check says whether this torch "
                     "follows it\n",
                     replay::kPolicyCheckedAgainst);
  if (!report.torch_version_checked) {
    out += fmt::format("Torch version: {} is not a release the policy was checked for ({}); replayed because "
                       "--force-torch-version was given, and no best setting is named\n",
                       report.torch_version.value_or("not recorded"), replay::checked_torch_releases());
  }
  out += fmt::format("Recorded settings: {}{}\n", report.recorded_settings,
                     report.settings_recorded ? "" : " (not recorded in this trace: the defaults are assumed)");
  if (report.fraction_limit) {
    out += fmt::format("Limit for PyTorch: {}: {}\n", format_bytes_exact(*report.fraction_limit),
                       report.fraction_limit_source);
  }
  out += fmt::format("{}: {}: {}\n", report.fraction_limit ? "Device capacity" : "Capacity for PyTorch",
                     report.capacity ? format_bytes_exact(*report.capacity) : std::string("unknown"),
                     report.capacity_source);
  const double per_setting = report.settings.empty() ? 0 : report.replay_seconds;
  out += fmt::format("Replayed {} allocator actions per setting, {} settings in {:.2f} s\n\n", report.actions,
                     report.settings.size() + 1, per_setting);

  const std::string oom_header =
      rec.first_oom_event ? fmt::format("OOM at #{} ({})", *rec.first_oom_event, format_bytes(rec.first_oom_request))
                          : std::string("OOM");
  std::vector<Line> lines;
  lines.push_back({"setting", "peak reserved", "allocated@peak", "reserved-allocated@peak", "inactive split",
                   "segments", oom_header, "predicted"});
  Line recorded;
  recorded.setting = "recorded";
  recorded.peak = format_bytes(rec.peak_reserved);
  recorded.allocated = "-";
  recorded.gap = "-";
  recorded.inactive = "-";
  recorded.segments = std::to_string(rec.segments_at_peak);
  recorded.oom = rec.first_oom_event ? "yes (measured)" : "no";
  recorded.until = "measured";
  lines.push_back(recorded);
  Line check = row_line("replay, same settings", self, report);
  check.until = report.self_check_exact ? fmt::format("self-check: exact ({} segment actions, {} block addresses)",
                                                      self.segment_actions_matched, self.addresses_matched)
                                        : "self-check FAILED " + predicted(self);
  lines.push_back(check);
  for (const SettingRow& row : report.settings) {
    if (row.error) {
      lines.push_back({row.label, "-", "-", "-", "-", "-", "-", *row.error});
      continue;
    }
    if (row.note && row.note->rfind("cannot be replayed", 0) == 0) {
      lines.push_back(
          {row.label, ">= " + format_bytes(row.result.peak_reserved), "-", "-", "-", "-", "cannot decide", *row.note});
      continue;
    }
    Line line = row_line(row.label, row.result, report);
    if (row.note) line.until += " (" + *row.note + ")";
    lines.push_back(line);
  }
  size_t widths[7] = {};
  for (const Line& l : lines) {
    const std::string* cells[7] = {&l.setting, &l.peak, &l.allocated, &l.gap, &l.inactive, &l.segments, &l.oom};
    for (int i = 0; i < 7; ++i) widths[i] = std::max(widths[i], cells[i]->size());
  }
  for (const Line& l : lines) {
    out += fmt::format("{:<{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {:>{}}  {:<{}}  {}\n", l.setting, widths[0], l.peak,
                       widths[1], l.allocated, widths[2], l.gap, widths[3], l.inactive, widths[4], l.segments,
                       widths[5], l.oom, widths[6], l.until);
  }
  if (!report.settings_skipped.empty()) out += "\nNo setting was replayed: " + report.settings_skipped + ".\n";
  if (!report.self_check_exact) {
    out += "\nThe self-check did not reproduce the recording: the rows below it are not predictions to rely on.\n";
  }
  if (!self.inferred_empty_cache.empty()) {
    out += fmt::format("\n{} empty_cache() calls inferred from segments freed between requests (this trace does not "
                       "record the calls); every setting empties its cache there too.\n",
                       self.inferred_empty_cache.size());
  }
  if (const std::string best = describe_best_setting(report); !best.empty()) {
    out += "\n" + best + "\n";
  } else if (!report.torch_version_checked && replay::best_setting(report)) {
    out += "\n" + unchecked_torch_note(report) + "\n";
  }
  return out;
}

std::string unchecked_torch_note(const WhatIfReport& report) {
  return fmt::format("No best setting named: torch {}'s allocator policy has not been checked (checked: {})",
                     report.torch_version.value_or("(not recorded)"), replay::checked_torch_releases());
}

std::string describe_best_setting(const WhatIfReport& report) {
  if (!report.self_check_exact || !report.torch_version_checked) return "";
  const SettingRow* best = replay::best_setting(report);
  if (!best) return "";
  const ReplayResult& r = best->result;
  const replay::RecordedFigures& rec = report.self_check.recorded;
  if (rec.first_oom_event) {
    return fmt::format(
        "Best setting: PYTORCH_ALLOC_CONF={} avoids the OOM at event {} (peak reserved {}, recorded {}){}", best->label,
        *rec.first_oom_event, format_bytes(r.peak_reserved), format_bytes(rec.peak_reserved),
        r.avoided_fatal_oom ? "; the trace ends there" : "");
  }
  return fmt::format("Best setting: PYTORCH_ALLOC_CONF={} lowers peak reserved from {} to {}", best->label,
                     format_bytes(rec.peak_reserved), format_bytes(r.peak_reserved));
}

std::string render_whatif_json(const WhatIfReport& report) {
  auto result_json = [](const ReplayResult& r) {
    Json j;
    j["peak_reserved_bytes"] = r.peak_reserved;
    j["peak_event_id"] = r.peak_event_id;
    j["allocated_at_peak_bytes"] = r.allocated_at_peak;
    j["inactive_split_at_peak_bytes"] = r.inactive_split_at_peak;
    j["segments_at_peak"] = r.segments_at_peak;
    j["peak_allocated_bytes"] = r.peak_allocated;
    j["actions"] = r.actions;
    j["requests"] = r.requests;
    j["divergence_event_id"] = r.divergence_event ? Json(*r.divergence_event) : Json(nullptr);
    j["divergence"] = r.divergence_event ? Json(r.divergence) : Json(nullptr);
    j["avoided_fatal_oom"] = r.avoided_fatal_oom;
    Json ooms = Json::array();
    for (const replay::OomVerdict& v : r.ooms) {
      ooms.push_back({{"event_id", v.event_id}, {"request_bytes", v.request}, {"oom", v.replayed_oom}});
    }
    j["recorded_ooms"] = ooms;
    j["new_oom_event_id"] = r.new_oom ? Json(r.new_oom->event_id) : Json(nullptr);
    j["alloc_retries"] = r.stats.alloc_retries;
    return j;
  };
  const replay::RecordedFigures& rec = report.self_check.recorded;
  Json out;
  out["trace"] = report.trace_path;
  out["device"] = report.device;
  out["torch_version"] = report.torch_version ? Json(*report.torch_version) : Json(nullptr);
  out["torch_git_version"] = report.torch_git_version ? Json(*report.torch_git_version) : Json(nullptr);
  out["torch_version_checked"] = report.torch_version_checked;
  out["policy_checked_against"] = replay::kPolicyCheckedAgainst;
  out["recorded_settings"] = report.recorded_settings;
  out["settings_recorded"] = report.settings_recorded;
  out["capacity_bytes"] = report.capacity ? Json(*report.capacity) : Json(nullptr);
  out["capacity_source"] = report.capacity_source;
  out["memory_fraction_limit_bytes"] = report.fraction_limit ? Json(*report.fraction_limit) : Json(nullptr);
  out["memory_fraction_limit_source"] = report.fraction_limit ? Json(report.fraction_limit_source) : Json(nullptr);
  out["replay_seconds"] = report.replay_seconds;
  out["recorded"] = {{"peak_reserved_bytes", rec.peak_reserved},
                     {"peak_event_id", rec.peak_event_id},
                     {"segments_at_peak", rec.segments_at_peak},
                     {"peak_live_requested_bytes", rec.peak_live_requested},
                     {"ooms", rec.ooms},
                     {"first_oom_event_id", rec.first_oom_event ? Json(*rec.first_oom_event) : Json(nullptr)},
                     {"requests", rec.requests}};
  Json check = result_json(report.self_check);
  check["exact"] = report.self_check_exact;
  check["segment_actions_matched"] = report.self_check.segment_actions_matched;
  check["addresses_matched"] = report.self_check.addresses_matched;
  check["unknown_frees"] = report.self_check.unknown_frees;
  check["inferred_empty_cache_event_ids"] = report.self_check.inferred_empty_cache;
  out["self_check"] = check;
  Json rows = Json::array();
  for (const SettingRow& row : report.settings) {
    Json j;
    j["setting"] = row.label;
    j["error"] = row.error ? Json(*row.error) : Json(nullptr);
    j["note"] = row.note ? Json(*row.note) : Json(nullptr);
    if (!row.error) j["result"] = result_json(row.result);
    rows.push_back(j);
  }
  out["settings"] = rows;
  out["settings_skipped"] = report.settings_skipped.empty() ? Json(nullptr) : Json(report.settings_skipped);
  const SettingRow* best =
      report.self_check_exact && report.torch_version_checked ? replay::best_setting(report) : nullptr;
  out["best_setting"] = best ? Json(best->label) : Json(nullptr);
  return out.dump(2) + "\n";
}

}  // namespace gmt::analysis
