// The control channel of a running process (`gpumemtrace ctl`, issue 36): pause and resume recording, and name a
// moment (a snapshot) that `report --at NAME` / `--since NAME` analyze, without touching the app.
//
// A Unix stream socket beside the trace, "<trace>.ctl", served by the writer thread between its batches (it wakes
// at least every 200 ms): no thread of its own, nothing on the app's threads. One request per connection, one line
// ("pause", "resume", "snapshot NAME", "status"), one line back ("ok ..." or "error: ..."). Only the process's own
// user may use it: the socket file is 0600, and each connection's peer is asked its uid (SO_PEERCRED) and refused
// unless it is ours or root's. The socket goes away when the trace is closed; a forked child serves its own trace's.
//
// Each action is also a mark in the trace (domain "gpumemtrace": "pause", "resume", "snapshot:NAME"), at its time,
// so that the report knows what a pause hid and where a snapshot lies (docs/trace-format.md, "Control marks").
#pragma once

#include <string>
#include <string_view>

namespace gmt::recorder {

// The socket's path for a trace at `trace_path`.
std::string control_socket_path(const std::string& trace_path);

// Opens the channel for the trace at `trace_path` (writer thread, once the trace exists). Failing to is said once
// on stderr and leaves the process unprofiled by ctl only.
void open_control_channel(const std::string& trace_path);
// Answers every request waiting, without blocking for long (writer thread, between batches).
void serve_control_requests();
// Closes the channel and removes its socket (writer thread, at the trace's close).
void close_control_channel();
// A mark in the domain "gpumemtrace" at this moment ("pause", "resume", "snapshot:NAME"), recorded like an NVTX mark
// of the calling thread, which never waits for the writer. Records even while paused.
void record_control_mark(std::string_view name);

// In a forked child: lets go of the parent's channel (the child's writer opens its own trace's).
void forget_control_channel_in_child();

}  // namespace gmt::recorder
