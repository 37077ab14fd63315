#include "analysis/read/salvage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/core.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "analysis/format.h"
#include "analysis/read/salvage_db.h"
#include "analysis/read/sqlite_pages.h"
#include "analysis/read/trace_file.h"
#include "schema/trace_schema.h"

namespace gmt::analysis {
namespace {

using sqlite_file::PageContent;
using sqlite_file::PageFile;
using sqlite_file::PageType;
using sqlite_file::Row;

// "20,111": counts in the salvage sentence are read by people.
std::string thousands(uint64_t value) {
  std::string digits = std::to_string(value);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<size_t>(at), ",");
  return digits;
}

void remove_file_and_companions(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
}

// A new empty file only this user can read, in $TMPDIR (else /tmp): never beside the trace, whose directory
// may be read-only, shared, or watched.
std::string private_temp_file(const char* purpose) {
  const char* dir = std::getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/gpumemtrace-" + purpose + "-XXXXXX";
  const int fd = ::mkstemp(path.data());  // mode 0600
  if (fd < 0)
    throw TraceError(
        fmt::format("cannot create a temporary file in '{}': {}", dir ? dir : "/tmp", std::strerror(errno)));
  ::close(fd);
  return path;
}

// The damaged trace copied once: the salvage then reads a file no writer can change under it.
void copy_file(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  const int out = ::open(to.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  bool ok = in >= 0 && out >= 0;
  std::string buffer(1 << 20, '\0');
  while (ok) {
    const ssize_t got = ::read(in, buffer.data(), buffer.size());
    if (got <= 0) {
      ok = got == 0;
      break;
    }
    ok = ::write(out, buffer.data(), static_cast<size_t>(got)) == got;
  }
  const int error = errno;
  if (in >= 0) ::close(in);
  if (out >= 0) ::close(out);
  if (!ok) throw TraceError(fmt::format("cannot copy '{}' to salvage it: {}", from, std::strerror(error)));
}

// Walks b-trees page by page, each page once, counting what could not be read.
class Walker {
 public:
  Walker(const PageFile& file, SalvageInfo& info) : file_(file), info_(info), seen_(file.pages_in_file() + 1) {
    for (uint32_t page : file.freelist_pages()) {
      if (page < seen_.size()) seen_[page] = true;  // free pages hold stale rows, never live ones
    }
  }

  bool seen(uint32_t page) const { return page < seen_.size() && seen_[page]; }

  // Calls on_page for every readable page of the tree under `root`; returns the root's type.
  template <typename OnPage>
  PageType tree(uint32_t root, OnPage on_page) {
    PageType root_type = PageType::Unknown;
    std::vector<uint32_t> pending{root};
    while (!pending.empty()) {
      const uint32_t page = pending.back();
      pending.pop_back();
      if (seen(page)) continue;
      if (page == 0 || page >= seen_.size()) {
        ++info_.pages_unreadable;  // beyond the end of a truncated file
        continue;
      }
      seen_[page] = true;
      PageContent content = file_.parse(page);
      if (page == root) root_type = content.type;
      if (content.type == PageType::Unknown) {
        ++info_.pages_unreadable;
        continue;
      }
      info_.rows_unreadable += content.cells_dropped;
      on_page(content);
      pending.insert(pending.end(), content.children.begin(), content.children.end());
    }
    return root_type;
  }

 private:
  const PageFile& file_;
  SalvageInfo& info_;
  std::vector<bool> seen_;
};

bool is_leaf(PageType type) { return type == PageType::TableLeaf || type == PageType::IndexLeaf; }

std::string text_of(const sqlite_file::Value& value) {
  const auto* bytes = std::get_if<std::string>(&value.data);
  return bytes && value.is_text ? *bytes : std::string();
}

// sqlite_schema (the tree under page 1): each table's root page and CREATE statement. Returns the indexes' root
// pages: SQLite rebuilds indexes from the rows, but their pages must not be taken for a table's lost pages.
std::vector<uint32_t> read_schema(Walker& walker, salvage::SalvageDb& db) {
  std::vector<uint32_t> index_roots;
  walker.tree(1, [&](const PageContent& page) {
    for (const Row& row : page.rows) {
      if (row.record.size() != 5 || !row.record[3].is_int()) continue;
      const auto root = static_cast<uint32_t>(std::get<int64_t>(row.record[3].data));
      if (text_of(row.record[0]) == "index") index_roots.push_back(root);
      if (text_of(row.record[0]) == "table") db.add_table(text_of(row.record[1]), text_of(row.record[4]), root);
    }
  });
  return index_roots;
}

void note_row(salvage::Table& table, const Row& row, SalvageInfo& info, bool added) {
  if (!added || (table.name != "events" && table.name != "event_rows")) return;
  ++info.events_read;
  info.highest_event_id = std::max(info.highest_event_id, row.rowid);
}

void insert_rows(salvage::SalvageDb& db, salvage::Table& table, const PageContent& page, SalvageInfo& info) {
  for (const Row& row : page.rows) {
    const bool added = db.insert(table, row);
    if (!added && !salvage::SalvageDb::fits(table, row, false)) ++info.rows_unreadable;
    note_row(table, row, info, added);
  }
}

// A page no readable tree reaches (its parent was lost): the one table whose rows all of its rows can be. Tables
// whose root is a leaf have no other page; a page that fits several tables is left out rather than guessed.
salvage::Table* owner_by_shape(salvage::SalvageDb& db, const PageContent& page) {
  if (page.rows.empty()) return nullptr;
  const bool index_page = page.type == PageType::IndexLeaf || page.type == PageType::IndexInterior;
  salvage::Table* owner = nullptr;
  for (salvage::Table& table : db.tables()) {
    if (table.single_page || table.without_rowid != index_page) continue;
    bool all = true;
    for (const Row& row : page.rows) all = all && salvage::SalvageDb::fits(table, row, true);
    if (!all) continue;
    if (owner) return nullptr;  // ambiguous
    owner = &table;
  }
  return owner;
}

void read_orphans(const PageFile& file, Walker& walker, salvage::SalvageDb& db, SalvageInfo& info) {
  for (uint32_t page = 2; page <= file.pages_in_file(); ++page) {
    if (walker.seen(page)) continue;
    PageContent content = file.parse(page);
    if (content.rows.empty()) continue;  // interior table pages, overflow pages, zeroed or foreign bytes
    salvage::Table* owner = owner_by_shape(db, content);
    if (!owner) {
      ++info.pages_unreadable;
      continue;
    }
    info.rows_unreadable += content.cells_dropped;
    insert_rows(db, *owner, content, info);
  }
}

void read_tables(const PageFile& file, salvage::SalvageDb& db, SalvageInfo& info) {
  Walker walker(file, info);
  const std::vector<uint32_t> index_roots = read_schema(walker, db);
  const bool schema_read = db.find("events") != nullptr || db.find("event_rows") != nullptr;
  if (!schema_read) db.add_current_schema();  // the schema is lost: every page is placed by its shape
  for (salvage::Table& table : db.tables()) {
    if (table.root == 0) continue;
    const PageType root_type =
        walker.tree(table.root, [&](const PageContent& page) { insert_rows(db, table, page, info); });
    table.single_page = is_leaf(root_type);
  }
  // After the tables: a damaged index page pointing into a table's pages then finds them seen already.
  for (uint32_t root : index_roots) walker.tree(root, [](const PageContent&) {});
  read_orphans(file, walker, db, info);
  for (const salvage::Table& table : db.tables()) {
    if (table.rows == 0 && !table.single_page) info.tables_lost.push_back(table.name);
  }
}

}  // namespace

std::string SalvageInfo::summary() const {
  std::string damage;
  if (expected_bytes > file_bytes) {
    damage = fmt::format("truncated at {} of {}", format_bytes(file_bytes), format_bytes(expected_bytes));
  }
  if (pages_unreadable > 0) {
    damage += fmt::format("{}{} unreadable", damage.empty() ? "" : "; ",
                          pages_unreadable == 1 ? "1 page" : thousands(pages_unreadable) + " pages");
  }
  if (rows_unreadable > 0) {
    damage += fmt::format("{}{} unreadable", damage.empty() ? "" : "; ",
                          rows_unreadable == 1 ? "1 row" : thousands(rows_unreadable) + " rows");
  }
  if (damage.empty()) damage = "malformed";
  std::string events =
      highest_event_id > static_cast<int64_t>(events_read)
          ? fmt::format("{} of at least {} events were read", thousands(events_read),
                        thousands(static_cast<uint64_t>(highest_event_id)))
          : fmt::format("{} {} read", thousands(events_read), events_read == 1 ? "event was" : "events were");
  std::string lost;
  for (const std::string& table : tables_lost) lost += (lost.empty() ? "; nothing was read of table " : ", ") + table;
  return fmt::format("salvaged: the trace was damaged ({}); {}{}; the report is incomplete", damage, events, lost);
}

SalvagedTrace::SalvagedTrace(SalvagedTrace&& other) noexcept
    : path_(std::move(other.path_)), info_(std::move(other.info_)) {
  other.path_.clear();
}

SalvagedTrace::~SalvagedTrace() {
  if (!path_.empty()) remove_file_and_companions(path_);
}

std::optional<std::string> truncation(const std::string& path) {
  // A trace being written keeps its newest pages in the write-ahead log, and a checkpoint writes the header's
  // new size before the pages that reach it: the main file alone is then not the whole trace.
  struct stat wal {};
  if (::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) return std::nullopt;
  try {
    PageFile file(path);
    if (file.header_u32(0) != 0x53514c69) return std::nullopt;  // "SQLi": TraceFile::open says what it is
    const uint64_t expected = uint64_t{file.pages_in_header()} * file.page_size();
    if (expected <= file.file_bytes()) return std::nullopt;
    return fmt::format("truncated at {} of {}", format_bytes(file.file_bytes()), format_bytes(expected));
  } catch (const std::exception&) {
    return std::nullopt;  // unreadable or too short: TraceFile::open gives the message
  }
}

SalvagedTrace salvage_trace(const std::string& path) {
  const std::string copy = private_temp_file("damaged");
  struct RemoveCopy {
    const std::string& path;
    ~RemoveCopy() { remove_file_and_companions(path); }
  } remove_copy{copy};
  copy_file(path, copy);
  SalvagedTrace salvaged(private_temp_file("salvaged"), {});
  SalvageInfo info;
  try {
    PageFile file(copy);
    const auto application_id = static_cast<int32_t>(file.header_u32(68));
    if (application_id != schema::kApplicationId) {
      throw TraceError(fmt::format("'{}' is damaged and is not recognizable as a gpumemtrace trace", path));
    }
    info.file_bytes = file.file_bytes();
    info.expected_bytes = uint64_t{file.pages_in_header()} * file.page_size();
    salvage::SalvageDb db(salvaged.path(), application_id, static_cast<int32_t>(file.header_u32(60)));
    read_tables(file, db, info);
    db.add_views();
    db.commit();
    const salvage::Table* events = db.find("event_rows") ? db.find("event_rows") : db.find("events");
    if (db.find("event_rows") && (!db.find("event_types") || db.find("event_types")->rows == 0)) {
      throw TraceError(fmt::format("'{}' is damaged: its event_types table (what each event is) could not be read, "
                                   "so none of its events can be",
                                   path));
    }
    if (!db.find("meta") || !events || events->rows + db.find("meta")->rows == 0) {
      throw TraceError(fmt::format("'{}' is damaged: none of its events or meta rows could be read", path));
    }
  } catch (const TraceError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw TraceError(fmt::format("'{}' is damaged and could not be salvaged: {}", path, e.what()));
  }
  salvaged.set_info(std::move(info));
  return salvaged;
}

}  // namespace gmt::analysis
