// Damaged traces give back what they can (docs/reliability.md, "Damaged traces"). A trace that is truncated,
// partly overwritten or otherwise malformed is copied to a private temporary file (the trace and its directory are
// never written), the rows that can still be read are taken out of the copy page by page (sqlite_pages.h) and
// written into a new database of the trace's own schema, and the report is made from that, marked incomplete,
// with a sentence saying what was lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gmt::analysis {

// What a salvage found and lost.
struct SalvageInfo {
  uint64_t file_bytes = 0;
  uint64_t expected_bytes = 0;    // the size the trace's header states; 0 when the header does not say
  uint64_t pages_unreadable = 0;  // b-tree pages that were referenced or present but could not be read
  uint64_t rows_unreadable = 0;   // cells of readable pages that could not be decoded
  uint64_t events_read = 0;
  int64_t highest_event_id = 0;          // ids count events from 1: a higher id than events_read means events were lost
  std::vector<std::string> tables_lost;  // tables of the trace's schema of which no row was read

  // "salvaged: the trace was damaged (truncated at 1.2 MiB of 3.4 MiB); 10,234 of at least 20,111 events were
  // read; the report is incomplete"
  std::string summary() const;
};

// The database made from a damaged trace, in a private temporary file removed with this object.
class SalvagedTrace {
 public:
  SalvagedTrace(std::string path, SalvageInfo info) : path_(std::move(path)), info_(std::move(info)) {}
  SalvagedTrace(SalvagedTrace&& other) noexcept;
  SalvagedTrace& operator=(SalvagedTrace&&) = delete;
  SalvagedTrace(const SalvagedTrace&) = delete;
  ~SalvagedTrace();

  const std::string& path() const { return path_; }
  const SalvageInfo& info() const { return info_; }
  void set_info(SalvageInfo info) { info_ = std::move(info); }

 private:
  std::string path_;
  SalvageInfo info_;
};

// "truncated at 1.2 MiB of 3.4 MiB" when the file is shorter than its own header says it is; nullopt otherwise, and
// when a write-ahead log beside the trace may hold the rest (a trace still being written).
std::optional<std::string> truncation(const std::string& path);

// Salvages the trace at `path` (which is only read). Throws TraceError when nothing usable could be read.
SalvagedTrace salvage_trace(const std::string& path);

}  // namespace gmt::analysis
