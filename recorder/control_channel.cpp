// See control_channel.h.
#include "recorder/control_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "recorder/event.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/strings.h"

extern "C" int gmt_set_recording_paused(int paused);  // recorder/pause.cpp
extern "C" int gmt_recording_paused(void);

namespace gmt::recorder {
namespace {

int g_listen_fd = -1;
std::string g_socket_path;

constexpr int kRequestWaitMs = 200;  // a client that connected but sends nothing in this time is dropped
constexpr size_t kMaxRequestBytes = 512;

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  size_t start = 0;
  while (start < text.size() && text[start] == ' ') ++start;
  return text.substr(start);
}

// A snapshot's name as the report's --at takes it: printable, no spaces, at most 128 bytes.
bool valid_snapshot_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    if (c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

std::string answer(const std::string& request) {
  if (request == "pause") {
    if (gmt_set_recording_paused(1)) return "ok already paused";
    record_control_mark("pause");  // recorded while paused: marks are the writer's, not a hook's
    return "ok paused";
  }
  if (request == "resume") {
    if (!gmt_recording_paused()) return "ok not paused";
    record_control_mark("resume");
    gmt_set_recording_paused(0);
    return "ok resumed";
  }
  if (request.rfind("snapshot", 0) == 0 && (request.size() == 8 || request[8] == ' ')) {
    const std::string name = request.size() > 9 ? trimmed(request.substr(9)) : "";
    if (!valid_snapshot_name(name)) return "error: a snapshot needs a name of 1-128 printable bytes without spaces";
    record_control_mark("snapshot:" + name);
    return "ok snapshot " + name + " at " + std::to_string(now_ns()) + " ns";
  }
  if (request == "status") {
    return std::string("ok pid ") + std::to_string(getpid()) + (gmt_recording_paused() ? " paused" : " recording");
  }
  return "error: unknown request '" + request + "' (pause, resume, snapshot NAME, status)";
}

// Whether the peer on `fd` runs as our user (or root).
bool peer_is_allowed(int fd) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return false;
  return peer.uid == geteuid() || peer.uid == 0;
}

void serve_one(int fd) {
  if (!peer_is_allowed(fd)) {
    static constexpr char kRefused[] = "error: refused: this process belongs to another user\n";
    (void)!write(fd, kRefused, sizeof kRefused - 1);
    return;
  }
  std::string request;
  char buffer[256];
  while (request.find('\n') == std::string::npos && request.size() < kMaxRequestBytes) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kRequestWaitMs) <= 0) break;
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  const std::string reply = answer(trimmed(request.substr(0, request.find('\n')))) + "\n";
  (void)!write(fd, reply.data(), reply.size());
}

}  // namespace

void record_control_mark(std::string_view name) {
  EventRecord e;
  e.time_ns = now_ns();
  e.thread_id = current_thread_id();
  e.kind = schema::EventKind::Mark;
  e.mark = MarkPayload{intern_string(name), intern_string("gpumemtrace")};
  NeverWaitScope never_wait;  // the writer thread must not wait for itself
  record(e, /*take_stack=*/false);
}

std::string control_socket_path(const std::string& trace_path) { return trace_path + ".ctl"; }

void open_control_channel(const std::string& trace_path) {
  if (g_listen_fd >= 0 || trace_path.empty()) return;
  const std::string path = control_socket_path(trace_path);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    std::fprintf(stderr, "gpumemtrace: no control channel (ctl): the path %s is too long for a socket\n", path.c_str());
    return;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  unlink(path.c_str());  // a socket left by a process killed before it could remove it (same pid, same pattern)
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || chmod(path.c_str(), 0600) != 0 ||
      listen(fd, 8) != 0) {
    std::fprintf(stderr, "gpumemtrace: no control channel (ctl) at %s: %s\n", path.c_str(), std::strerror(errno));
    close(fd);
    unlink(path.c_str());
    return;
  }
  g_listen_fd = fd;
  g_socket_path = path;
}

void serve_control_requests() {
  if (g_listen_fd < 0) return;
  for (int served = 0; served < 16; ++served) {  // a burst is answered over several batches, never forever
    int fd = accept4(g_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: nothing waiting
    serve_one(fd);
    close(fd);
  }
}

void forget_control_channel_in_child() {
  if (g_listen_fd >= 0) close(g_listen_fd);  // the parent's socket: its file stays, the parent serves it
  g_listen_fd = -1;
  g_socket_path.clear();
}

void close_control_channel() {
  if (g_listen_fd < 0) return;
  close(g_listen_fd);
  g_listen_fd = -1;
  unlink(g_socket_path.c_str());
}

}  // namespace gmt::recorder
