#include "analysis/read/sqlite_pages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace gmt::analysis::sqlite_file {
namespace {

constexpr size_t kFileHeaderBytes = 100;
// No trace row comes near this; a larger payload size is a damaged cell, not a reason to read a gigabyte.
constexpr uint64_t kMaxPayloadBytes = 64ull << 20;

uint32_t big_endian(const std::string& bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) value = (value << 8) | static_cast<uint8_t>(bytes[offset + i]);
  return value;
}

// SQLite's varint: 1 to 9 bytes, 7 bits each, the ninth byte all 8. False when it runs past `end`.
bool read_varint(const std::string& bytes, size_t& offset, size_t end, uint64_t& value) {
  value = 0;
  for (int i = 0; i < 9; ++i) {
    if (offset >= end) return false;
    const uint8_t byte = static_cast<uint8_t>(bytes[offset++]);
    if (i == 8) {
      value = (value << 8) | byte;
      return true;
    }
    value = (value << 7) | (byte & 0x7f);
    if ((byte & 0x80) == 0) return true;
  }
  return true;
}

// Bytes of a value of serial type `type`; nullopt for the reserved types 10 and 11.
std::optional<uint64_t> serial_bytes(uint64_t type) {
  static constexpr uint8_t kIntBytes[] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0};
  if (type <= 9) return kIntBytes[type];
  if (type == 10 || type == 11) return std::nullopt;
  return (type - 12) / 2;
}

Value decode_value(uint64_t type, const std::string& payload, size_t offset, uint64_t length) {
  Value value;
  if (type == 0) return value;
  if (type == 8 || type == 9) {
    value.data = static_cast<int64_t>(type - 8);
    return value;
  }
  if (type <= 6) {
    uint64_t bits = 0;
    for (uint64_t i = 0; i < length; ++i) bits = (bits << 8) | static_cast<uint8_t>(payload[offset + i]);
    const unsigned shift = static_cast<unsigned>(64 - 8 * length);
    value.data = static_cast<int64_t>(bits << shift) >> shift;  // sign-extend from the stored width
    return value;
  }
  if (type == 7) {
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(payload[offset + i]);
    double number = 0;
    std::memcpy(&number, &bits, sizeof number);
    value.data = number;
    return value;
  }
  value.data = payload.substr(offset, length);
  value.is_text = (type & 1) == 1;
  return value;
}

bool page_type_known(uint8_t type) { return type == 2 || type == 5 || type == 10 || type == 13; }

}  // namespace

std::optional<Record> decode_record(const std::string& payload) {
  size_t offset = 0;
  uint64_t header_bytes = 0;
  if (!read_varint(payload, offset, payload.size(), header_bytes)) return std::nullopt;
  if (header_bytes < offset || header_bytes > payload.size()) return std::nullopt;
  std::vector<uint64_t> types;
  while (offset < header_bytes) {
    uint64_t type = 0;
    if (!read_varint(payload, offset, header_bytes, type)) return std::nullopt;
    types.push_back(type);
  }
  if (offset != header_bytes) return std::nullopt;
  Record record;
  size_t body = header_bytes;
  for (uint64_t type : types) {
    std::optional<uint64_t> length = serial_bytes(type);
    if (!length || *length > payload.size() - body) return std::nullopt;
    record.push_back(decode_value(type, payload, body, *length));
    body += *length;
  }
  if (body != payload.size()) return std::nullopt;  // a record that does not add up is a damaged one
  return record;
}

PageFile::PageFile(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    const int error = errno;
    ::close(fd_);
    throw std::runtime_error("cannot read '" + path + "': " + std::strerror(error));
  }
  file_bytes_ = static_cast<uint64_t>(st.st_size);
  header_.resize(kFileHeaderBytes);
  if (pread(fd_, header_.data(), kFileHeaderBytes, 0) != static_cast<ssize_t>(kFileHeaderBytes)) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("'" + path + "' is shorter than an SQLite header");
  }
  // A page size that is not a power of two from 512 to 65536 is a damaged header: SQLite's default is the
  // likeliest truth (the recorder never changes it).
  uint32_t size = big_endian(header_, 16, 2);
  if (size == 1) size = 65536;
  if (size >= 512 && size <= 65536 && (size & (size - 1)) == 0) page_size_ = size;
  const uint32_t reserved = static_cast<uint8_t>(header_[20]);
  usable_ = reserved < page_size_ - 480 ? page_size_ - reserved : page_size_;
  pages_in_file_ = static_cast<uint32_t>(std::min<uint64_t>(file_bytes_ / page_size_, UINT32_MAX));
  // The header's page count is valid only when its change counter matches version-valid-for (fileformat2 1.3.8).
  if (header_u32(24) == header_u32(92)) pages_in_header_ = header_u32(28);
}

PageFile::~PageFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint32_t PageFile::header_u32(size_t offset) const { return big_endian(header_, offset, 4); }

std::string PageFile::read(uint32_t page) const {
  if (page == 0 || page > pages_in_file_) return {};
  std::string bytes(page_size_, '\0');
  const off_t at = static_cast<off_t>(page - 1) * page_size_;
  if (pread(fd_, bytes.data(), page_size_, at) != static_cast<ssize_t>(page_size_)) return {};
  return bytes;
}

bool PageFile::read_overflow(uint32_t page, size_t wanted, std::string& payload) const {
  // Each overflow page: the next page's number, then usable - 4 bytes. A chain longer than the file is a loop.
  for (uint32_t hops = 0; payload.size() < wanted; ++hops) {
    if (hops > pages_in_file_) return false;
    std::string bytes = read(page);
    if (bytes.empty()) return false;
    const size_t take = std::min<size_t>(wanted - payload.size(), usable_ - 4);
    payload.append(bytes, 4, take);
    page = big_endian(bytes, 0, 4);
  }
  return true;
}

bool PageFile::read_cell(const std::string& bytes, size_t offset, PageType type, PageContent& content) const {
  const bool interior = type == PageType::TableInterior || type == PageType::IndexInterior;
  if (interior) {
    if (offset + 4 > usable_) return false;
    content.children.push_back(big_endian(bytes, offset, 4));
    offset += 4;
  }
  if (type == PageType::TableInterior) return true;  // only a rowid key follows: no row
  uint64_t payload_bytes = 0;
  if (!read_varint(bytes, offset, usable_, payload_bytes) || payload_bytes > kMaxPayloadBytes) return false;
  Row row;
  if (type == PageType::TableLeaf) {
    uint64_t rowid = 0;
    if (!read_varint(bytes, offset, usable_, rowid)) return false;
    row.rowid = static_cast<int64_t>(rowid);
  }
  // How much of the payload is on the page itself (fileformat2 1.6, "cell payload overflow pages").
  const uint64_t u = usable_;
  const uint64_t max_local = type == PageType::TableLeaf ? u - 35 : ((u - 12) * 64 / 255) - 23;
  const uint64_t min_local = ((u - 12) * 32 / 255) - 23;
  uint64_t local = payload_bytes;
  if (payload_bytes > max_local) {
    const uint64_t k = min_local + ((payload_bytes - min_local) % (u - 4));
    local = k <= max_local ? k : min_local;
  }
  const bool overflows = local < payload_bytes;
  if (offset + local + (overflows ? 4 : 0) > usable_) return false;
  std::string payload = bytes.substr(offset, local);
  if (overflows && !read_overflow(big_endian(bytes, offset + local, 4), static_cast<size_t>(payload_bytes), payload)) {
    return false;
  }
  std::optional<Record> record = decode_record(payload);
  if (!record) return false;
  row.record = std::move(*record);
  content.rows.push_back(std::move(row));
  return true;
}

PageContent PageFile::parse(uint32_t page) const {
  PageContent content;
  const std::string bytes = read(page);
  if (bytes.empty()) return content;
  const size_t start = page == 1 ? kFileHeaderBytes : 0;
  const uint8_t type = static_cast<uint8_t>(bytes[start]);
  if (!page_type_known(type)) return content;
  const bool interior = type == 2 || type == 5;
  const size_t header = start + (interior ? 12 : 8);
  const uint32_t cells = big_endian(bytes, start + 3, 2);
  if (header + 2 * static_cast<size_t>(cells) > usable_) return content;  // a cell count no page can hold
  content.type = static_cast<PageType>(type);
  const size_t content_start = header + 2 * static_cast<size_t>(cells);
  for (uint32_t i = 0; i < cells; ++i) {
    const size_t pointer = big_endian(bytes, header + 2 * static_cast<size_t>(i), 2);
    if (pointer < content_start || pointer >= usable_ || !read_cell(bytes, pointer, content.type, content)) {
      ++content.cells_dropped;
    }
  }
  if (interior) content.children.push_back(big_endian(bytes, start + 8, 4));  // the right-most child
  return content;
}

std::vector<uint32_t> PageFile::freelist_pages() const {
  std::vector<uint32_t> pages;
  uint32_t trunk = header_u32(32);
  for (uint32_t hops = 0; trunk != 0 && hops <= pages_in_file_; ++hops) {
    const std::string bytes = read(trunk);
    if (bytes.empty()) break;
    pages.push_back(trunk);
    const uint32_t leaves = std::min<uint32_t>(big_endian(bytes, 4, 4), (usable_ - 8) / 4);
    for (uint32_t i = 0; i < leaves; ++i) pages.push_back(big_endian(bytes, 8 + 4 * static_cast<size_t>(i), 4));
    trunk = big_endian(bytes, 0, 4);
  }
  return pages;
}

}  // namespace gmt::analysis::sqlite_file
