#include "recorder/disk_reserve.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace gmt::recorder {
namespace {

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A file with no name in `directory`, or -1.
int open_nameless_file(const std::string& directory) {
  int fd = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  // Filesystems without O_TMPFILE (before Linux 3.11, some network filesystems): a named file, unlinked at once.
  std::string name = directory + "/.gpumemtrace-reserve-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

}  // namespace

bool DiskReserve::hold_beside(const std::string& trace_path) {
  release();
  const int fd = open_nameless_file(directory_of(trace_path));
  if (fd < 0) return false;
  // posix_fallocate writes zeros where the filesystem cannot allocate: either way the blocks are the file's.
  if (::posix_fallocate(fd, 0, static_cast<off_t>(kBytes)) != 0) {
    ::close(fd);
    return false;
  }
  fd_ = fd;
  return true;
}

bool DiskReserve::release() {
  if (fd_ < 0) return false;
  ::close(fd_);
  fd_ = -1;
  return true;
}

}  // namespace gmt::recorder
