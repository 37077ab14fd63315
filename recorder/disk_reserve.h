// A little disk space held back for the words "disk full". A trace written in WAL mode grows its WAL with every
// transaction; when the disk fills, the failed transaction is rolled back, but writing meta.stop_reason needs at
// least one more WAL frame, and a disk filled to the last page refuses it (seen: a 404 KiB tmpfs, every time).
// So the writer holds a small file on the trace's filesystem from the start and lets it go right before writing
// the reason. The file has no name (O_TMPFILE, or unlinked at once where that is not supported): nothing is left
// behind if the process is killed, and its space goes back when the descriptor is closed.
#pragma once

#include <cstddef>
#include <string>

namespace gmt::recorder {

class DiskReserve {
 public:
  // Enough for the stop reason's upsert: a few 4 KiB WAL frames (the meta page, a split, the commit), tmpfs pages.
  static constexpr size_t kBytes = 64 * 1024;

  DiskReserve() = default;
  DiskReserve(const DiskReserve&) = delete;
  DiskReserve& operator=(const DiskReserve&) = delete;
  ~DiskReserve() { release(); }

  // Holds kBytes in the directory of `trace_path`. Best effort: false (and nothing held) where the space cannot be
  // had; the trace is written either way.
  bool hold_beside(const std::string& trace_path);
  // Gives the space back to the filesystem; true when some was held.
  bool release();
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace gmt::recorder
