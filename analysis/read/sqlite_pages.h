// Reading an SQLite database file page by page, without SQLite: what salvage.cpp needs to take the readable rows
// out of a damaged trace (https://www.sqlite.org/fileformat2.html is the reference for every offset here).
//
// Why our own reader: Debian's libsqlite3 (3.40) has no recovery API, and SQLite's recover extension
// (ext/recover, in the 3.40 source) reads pages through the sqlite_dbpage virtual table, which Debian's build
// leaves out (no SQLITE_ENABLE_DBPAGE_VTAB in its compile options): using it would mean building and shipping a
// second SQLite. The subset a trace needs is small: table and index b-tree pages, overflow chains and records.
//
// Every read is bounds-checked: the file is damaged by assumption, so a bad offset, a loop in a chain or a
// record that does not add up drops that cell or page, never more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace gmt::analysis::sqlite_file {

// A column value as a record stores it. std::monostate is NULL; text and blob are both bytes (Value::is_text).
struct Value {
  std::variant<std::monostate, int64_t, double, std::string> data;
  bool is_text = false;
  bool is_null() const { return std::holds_alternative<std::monostate>(data); }
  bool is_int() const { return std::holds_alternative<int64_t>(data); }
};
using Record = std::vector<Value>;

// Decodes a record (header of serial types, then the values); nullopt when it does not add up exactly.
std::optional<Record> decode_record(const std::string& payload);

enum class PageType : uint8_t {
  Unknown = 0,
  IndexInterior = 2,
  TableInterior = 5,
  IndexLeaf = 10,
  TableLeaf = 13,
};

// A row found on a page: its rowid (table b-trees only) and its record, decoded.
struct Row {
  int64_t rowid = 0;
  Record record;
};

// What one b-tree page holds: its rows (leaves, and index interior pages, whose dividers are rows) and its children.
struct PageContent {
  PageType type = PageType::Unknown;
  std::vector<Row> rows;
  std::vector<uint32_t> children;
  uint64_t cells_dropped = 0;  // cells that could not be read (bad offsets, broken overflow chain, bad record)
};

// The database file, read with pread. Pages are numbered from 1, as SQLite numbers them.
class PageFile {
 public:
  // Throws std::runtime_error with a sentence when the file cannot be opened or has no usable header.
  explicit PageFile(const std::string& path);
  ~PageFile();
  PageFile(const PageFile&) = delete;
  PageFile& operator=(const PageFile&) = delete;

  uint32_t page_size() const { return page_size_; }
  uint64_t file_bytes() const { return file_bytes_; }
  uint32_t pages_in_file() const { return pages_in_file_; }  // whole pages present
  // The database size the header states (0 when the header's figure is not valid): a longer file than the
  // one present means it was truncated.
  uint32_t pages_in_header() const { return pages_in_header_; }
  uint32_t header_u32(size_t offset) const;  // a big-endian field of the 100-byte header

  // The page's bytes; empty when the page is not (wholly) in the file.
  std::string read(uint32_t page) const;
  // The page parsed as a b-tree page; type Unknown when it is none (a free or overflow page, or garbage).
  PageContent parse(uint32_t page) const;
  // Pages on the freelist (trunks and leaves) that the header's chain reaches: stale content, never rows.
  std::vector<uint32_t> freelist_pages() const;

 private:
  bool read_overflow(uint32_t first, size_t wanted, std::string& payload) const;
  bool read_cell(const std::string& bytes, size_t offset, PageType type, PageContent& content) const;

  int fd_ = -1;
  std::string header_;
  uint32_t page_size_ = 4096;
  uint32_t usable_ = 4096;
  uint64_t file_bytes_ = 0;
  uint32_t pages_in_file_ = 0;
  uint32_t pages_in_header_ = 0;
};

}  // namespace gmt::analysis::sqlite_file
