// `gpumemtrace ctl`: pause, resume or mark a moment of a running process through its control channel
// (recorder/control_channel.h: a socket beside its trace, "<trace>.ctl", served by its writer thread).
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/live_targets.h"

namespace gmt::cli {
namespace {

constexpr int kReplyWaitMs = 5000;  // the writer answers between batches, at least every 200 ms

// Sends one request; the reply line, or an error with its exit code.
int send_request(const std::string& socket_path, const std::string& request, std::string& reply) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof address.sun_path) {
    reply = "the socket's path is too long";
    return kExitBadInput;
  }
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    reply = std::strerror(errno);
    return kExitInternal;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    close(fd);
    if (error == EACCES || error == EPERM) {
      reply = "refused: the process belongs to another user";
      return kExitCtlRefused;
    }
    reply = fmt::format("the process does not answer ({}): it has probably exited", std::strerror(error));
    return kExitCtlNotRunning;
  }
  const std::string line = request + "\n";
  (void)!write(fd, line.data(), line.size());
  std::string received;
  char buffer[512];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kReplyWaitMs) <= 0) break;
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    received.append(buffer, static_cast<size_t>(n));
    if (received.find('\n') != std::string::npos) break;
  }
  close(fd);
  reply = received.substr(0, received.find('\n'));
  if (reply.empty()) {
    reply = "no answer within 5 s";
    return kExitCtlNotRunning;
  }
  if (reply.rfind("ok", 0) == 0) return kExitOk;
  return reply.find("refused") != std::string::npos ? kExitCtlRefused : kExitBadInput;
}

}  // namespace

CommandAction add_ctl_command(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  auto request = std::make_shared<std::string>();
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("ctl", "Pause, resume or mark a moment of a process running under `run`");
  cmd->footer(
      "TARGET is the process's PID, its trace file, a directory of traces (every process of a job recording\n"
      "there), or the run's trace pattern ('traces/t.%p.db', 'traces/*.db'). The PID of `gpumemtrace run` itself (or "
      "of any process that records nothing) stands for the\n"
      "processes it started that record. Only the process's own user may control it.\n"
      "  pause            stop recording (frees of memory recorded before are then missing: the report says so)\n"
      "  resume           record again\n"
      "  snapshot NAME    mark this moment: `report --at NAME` shows what was live then, `--since NAME` what came "
      "after\n"
      "  status           whether it is recording\n"
      "Examples:\n"
      "  gpumemtrace ctl 12345 snapshot before-load\n"
      "  gpumemtrace ctl gpumemtrace.12345.db pause\n"
      "  gpumemtrace run --paused -o svc.db -- ./server & gpumemtrace ctl $! resume   # $!: run's own PID\n"
      "  gpumemtrace report gpumemtrace.12345.db --at before-load\n"
      "Exit codes: 0 done, 2 bad request or target, 8 no such process or it records nothing, 9 refused (another "
      "user).");
  cmd->add_option("target", *target, "PID, trace file, directory of traces, or trace pattern")->required();
  cmd->add_option("request", *request, "pause, resume, snapshot or status")
      ->required()
      ->check(CLI::IsMember({"pause", "resume", "snapshot", "status"}));
  cmd->add_option("name", *name, "The snapshot's name (snapshot only): printable, no spaces");
  return [target, request, name] {
    if ((*request == "snapshot") == name->empty()) {
      fmt::print(stderr, "gpumemtrace ctl: {}\n",
                 name->empty() ? "snapshot needs a NAME" : "only snapshot takes a NAME");
      return kExitBadInput;
    }
    Targets targets = live_targets(*target);
    if (targets.sockets.empty()) {
      fmt::print(stderr, "gpumemtrace ctl: {}\n", targets.error);
      return targets.exit_code;
    }
    const std::string line = name->empty() ? *request : *request + " " + *name;
    int exit_code = kExitOk;
    for (const std::string& socket : targets.sockets) {
      std::string reply;
      int code = send_request(socket, line, reply);
      const std::string trace = trace_of_socket(socket);
      if (code == kExitOk) {
        fmt::print("{}: {}\n", trace, reply);
      } else {
        fmt::print(stderr, "gpumemtrace ctl: {}: {}\n", trace, reply);
        if (exit_code == kExitOk) exit_code = code;
      }
    }
    return exit_code;
  };
}

}  // namespace gmt::cli
