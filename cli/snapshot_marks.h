// Snapshots named by `gpumemtrace ctl PID snapshot NAME` (recorder/control_channel.h): marks "snapshot:NAME" in the
// domain "gpumemtrace", which `report --at NAME` and `--since NAME` take as times.
#pragma once

#include <optional>
#include <string>

namespace gmt::cli {

// The time of the snapshot `name` in the trace at `trace_path`, in seconds from the process start as text (the
// form --since and --until take); nullopt, after saying why on stderr (no such snapshot: the names it has), when
// there is none.
std::optional<std::string> snapshot_seconds(const std::string& trace_path, const std::string& name, const char* option);

// Whether `text` names a time in seconds ("1.5") rather than a snapshot.
bool looks_like_seconds(const std::string& text);

}  // namespace gmt::cli
