// `gpumemtrace ctl`: pause, resume or mark a moment of a running process through its control channel
// (recorder/control_channel.h: a socket beside its trace, "<trace>.ctl", served by its writer thread).
#include <dirent.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

namespace gmt::cli {
namespace {

constexpr const char* kSocketSuffix = ".ctl";
constexpr int kReplyWaitMs = 5000;  // the writer answers between batches, at least every 200 ms

bool is_socket(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

struct Targets {
  std::vector<std::string> sockets;
  std::string error;  // why none was found
  int exit_code = kExitOk;
};

// The control sockets of process `pid`: the traces it holds open that have one beside them.
Targets sockets_of_process(const std::string& pid) {
  Targets found;
  const std::string fd_dir = "/proc/" + pid + "/fd";
  DIR* dir = opendir(fd_dir.c_str());
  if (!dir) {
    if (errno == EACCES) {
      found.error = fmt::format("process {} belongs to another user: only its own user may control it", pid);
      found.exit_code = kExitCtlRefused;
    } else {
      found.error = fmt::format("no process {}", pid);
      found.exit_code = kExitCtlNotRunning;
    }
    return found;
  }
  while (dirent* entry = readdir(dir)) {
    char target[4096];
    const std::string link = fd_dir + "/" + entry->d_name;
    ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    const std::string socket = std::string(target) + kSocketSuffix;
    if (target[0] == '/' && is_socket(socket)) found.sockets.push_back(socket);
  }
  closedir(dir);
  if (found.sockets.empty()) {
    found.error = fmt::format(
        "process {} has no gpumemtrace control channel: it was not started by `gpumemtrace run`, or has not made its "
        "first CUDA call yet (the trace and its channel are created then)",
        pid);
    found.exit_code = kExitCtlNotRunning;
  }
  return found;
}

// A trace file's socket, or every socket in a directory of traces (a job of several processes).
Targets sockets_of_path(const std::string& path) {
  Targets found;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    found.error = fmt::format("{}: no such trace or directory", path);
    found.exit_code = kExitBadInput;
    return found;
  }
  if (S_ISDIR(st.st_mode)) {
    if (DIR* dir = opendir(path.c_str())) {
      while (dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, kSocketSuffix) == 0 && is_socket(path + "/" + name)) {
          found.sockets.push_back(path + "/" + name);
        }
      }
      closedir(dir);
    }
    if (found.sockets.empty()) {
      found.error = fmt::format("no running process records into {} (no *{} socket there)", path, kSocketSuffix);
      found.exit_code = kExitCtlNotRunning;
    }
    return found;
  }
  const std::string socket = path + kSocketSuffix;
  if (!is_socket(socket)) {
    found.error = fmt::format("no running process records into {}: it has exited, or was recorded elsewhere", path);
    found.exit_code = kExitCtlNotRunning;
    return found;
  }
  found.sockets.push_back(socket);
  return found;
}

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
      "TARGET is the process's PID, its trace file, or a directory of traces (every process of a job recording\n"
      "there). Only the process's own user may control it.\n"
      "  pause            stop recording (frees of memory recorded before are then missing: the report says so)\n"
      "  resume           record again\n"
      "  snapshot NAME    mark this moment: `report --at NAME` shows what was live then, `--since NAME` what came "
      "after\n"
      "  status           whether it is recording\n"
      "Examples:\n"
      "  gpumemtrace ctl 12345 snapshot before-load\n"
      "  gpumemtrace ctl gpumemtrace.12345.db pause\n"
      "  gpumemtrace report gpumemtrace.12345.db --at before-load\n"
      "Exit codes: 0 done, 2 bad request or target, 8 no such process or it records nothing, 9 refused (another "
      "user).");
  cmd->add_option("target", *target, "PID, trace file, or directory of traces")->required();
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
    Targets targets = all_digits(*target) ? sockets_of_process(*target) : sockets_of_path(*target);
    if (targets.sockets.empty()) {
      fmt::print(stderr, "gpumemtrace ctl: {}\n", targets.error);
      return targets.exit_code;
    }
    const std::string line = name->empty() ? *request : *request + " " + *name;
    int exit_code = kExitOk;
    for (const std::string& socket : targets.sockets) {
      std::string reply;
      int code = send_request(socket, line, reply);
      const std::string trace = socket.substr(0, socket.size() - std::strlen(kSocketSuffix));
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
