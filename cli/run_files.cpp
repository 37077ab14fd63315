#include "cli/run_files.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace gmt::cli {

std::string make_run_file(const std::string& dir, const std::string& kind) {
  std::string path = dir + "/gpumemtrace-" + kind + "-" + std::to_string(getpid()) + "-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return {};
  close(fd);
  return path;
}

int remove_files_of_ended_runs(const std::string& dir, const std::string& kind) {
  DIR* folder = opendir(dir.c_str());
  if (!folder) return 0;
  const std::string prefix = "gpumemtrace-" + kind + "-";
  int removed = 0;
  while (const dirent* entry = readdir(folder)) {
    const std::string_view name = entry->d_name;
    if (name.substr(0, prefix.size()) != prefix) continue;
    // "<pid>-XXXXXX": a file of an older build (no pid) or of another shape is left alone.
    const std::string_view rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string_view::npos || rest.size() - dash - 1 != 6) continue;
    long pid = 0;
    bool digits = true;
    for (char c : rest.substr(0, dash)) {
      digits = digits && c >= '0' && c <= '9';
      pid = pid * 10 + (c - '0');
      if (pid > 1L << 30) digits = false;
    }
    // Only a run known to have ended: kill(pid, 0) says ESRCH. EPERM is a live process of another user.
    if (!digits || pid <= 0 || kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (unlink((dir + "/" + std::string(name)).c_str()) == 0) ++removed;
  }
  closedir(folder);
  return removed;
}

std::string temporary_folder() {
  const char* tmp = getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

}  // namespace gmt::cli
