// See live_targets.h.
#include "cli/live_targets.h"

#include <dirent.h>
#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/exit_codes.h"

namespace gmt::cli {

bool is_socket(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

namespace {

constexpr const char* kSocketSuffix = kControlSocketSuffix;

// The control sockets beside the traces process `pid` holds open; false when its fds cannot be read (no such process,
// or another user's: `error` and `exit_code` then say which).
bool sockets_held_by(const std::string& pid, Targets& found) {
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
    return false;
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
  return true;
}

// The parent pid of `pid` from /proc/PID/stat (the field after the command name, which may hold spaces and
// parentheses: read from the last ')'); 0 when unreadable.
long parent_of(const std::string& pid) {
  std::ifstream stat_file("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat_file, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  long parent = 0;
  rest >> state >> parent;
  return parent;
}

// Every descendant of `pid` (children, their children, ...), nearest first.
std::vector<std::string> descendants_of(const std::string& pid) {
  std::map<long, std::vector<std::string>> children;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) {
      const std::string name = entry->d_name;
      if (all_digits(name)) children[parent_of(name)].push_back(name);
    }
    closedir(proc);
  }
  std::vector<std::string> found;
  std::vector<std::string> frontier{pid};
  while (!frontier.empty() && found.size() < 4096) {
    std::vector<std::string> next;
    for (const std::string& parent : frontier) {
      for (const std::string& child : children[std::stol(parent)]) {
        found.push_back(child);
        next.push_back(child);
      }
    }
    frontier.swap(next);
  }
  return found;
}

}  // namespace

// The control sockets of process `pid`: the traces it holds open that have one beside them. A process that holds
// none (`gpumemtrace run` itself, the launcher whose PID users see, or a shell script the app runs under) stands
// for the processes below it that do: its app, and every process of a job it started.
Targets sockets_of_process(const std::string& pid) {
  Targets found;
  if (!sockets_held_by(pid, found)) return found;
  if (found.sockets.empty()) {
    for (const std::string& child : descendants_of(pid)) {
      Targets below;
      if (sockets_held_by(child, below)) {
        found.sockets.insert(found.sockets.end(), below.sockets.begin(), below.sockets.end());
      }
    }
  }
  std::sort(found.sockets.begin(), found.sockets.end());  // a trace opened twice is one process
  found.sockets.erase(std::unique(found.sockets.begin(), found.sockets.end()), found.sockets.end());
  if (found.sockets.empty()) {
    found.error = fmt::format(
        "process {} has no gpumemtrace control channel, nor has any process it started: it was not started by "
        "`gpumemtrace run`, has not made its first CUDA call yet (the trace and its channel are created then), or "
        "has exited",
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

// A pattern of `run -o` (%p, %r, %d, %h) or a shell pattern: the sockets of every trace it matches.
Targets sockets_of_pattern(const std::string& pattern) {
  Targets found;
  std::string shell_pattern;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      shell_pattern += pattern[i + 1] == '%' ? "%" : "*";
      ++i;
    } else {
      shell_pattern += pattern[i];
    }
  }
  glob_t matches{};
  if (glob((shell_pattern + kSocketSuffix).c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      if (is_socket(matches.gl_pathv[i])) found.sockets.push_back(matches.gl_pathv[i]);
    }
  }
  globfree(&matches);
  if (found.sockets.empty()) {
    found.error = fmt::format("no running process records into a trace matching {}", pattern);
    found.exit_code = kExitCtlNotRunning;
  }
  return found;
}

bool is_trace_pattern(const std::string& target) { return target.find_first_of("*?[%") != std::string::npos; }

Targets live_targets(const std::string& target) {
  struct stat st {};
  Targets found = all_digits(target)                                           ? sockets_of_process(target)
                  : is_trace_pattern(target) && stat(target.c_str(), &st) != 0 ? sockets_of_pattern(target)
                                                                               : sockets_of_path(target);
  std::sort(found.sockets.begin(), found.sockets.end());
  found.sockets.erase(std::unique(found.sockets.begin(), found.sockets.end()), found.sockets.end());
  return found;
}

std::string trace_of_socket(const std::string& socket) {
  return socket.substr(0, socket.size() - std::string(kSocketSuffix).size());
}

}  // namespace gmt::cli
