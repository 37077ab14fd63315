// Why recording stopped early, written into the trace (meta.stop_reason) so that `report` can say "disk full"
// instead of guessing a crash. Runs in the writer thread after a write failed.
#pragma once

#include <string>

namespace gmt::recorder {

// "disk full: <SQLite's message>" for SQLite's full-disk error, else "write failed: <message>".
std::string stop_reason_for_write_error(const std::string& sqlite_message);

// The fallback when the writer's own connection could not store it (TraceWriter::record_stop_reason): best effort,
// through a short-lived connection of its own; a full disk may refuse this too (the warning on stderr was given
// already). Returns whether the reason was stored.
bool store_stop_reason(const std::string& trace_path, const std::string& reason);

}  // namespace gmt::recorder
