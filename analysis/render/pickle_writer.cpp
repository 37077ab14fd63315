#include "analysis/render/pickle_writer.h"

#include <cstring>

namespace gmt::analysis {
namespace {

// Lib/pickle.py's opcodes (protocol 0-2).
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kTuple = 't';
constexpr char kBinUnicode = 'X';
constexpr char kBinInt = 'J';   // 4-byte signed
constexpr char kBinInt1 = 'K';  // 1-byte unsigned
constexpr char kBinInt2 = 'M';  // 2-byte unsigned
constexpr char kLong1 = '\x8a';
constexpr char kBinFloat = 'G';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kNone = 'N';
constexpr char kLongBinPut = 'r';
constexpr char kLongBinGet = 'j';

// The length of the valid UTF-8 sequence at text[i], or 0 when it is not one.
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < kLeast[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8_sequence(text, i);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

PickleWriter::PickleWriter() {
  out_ += kProto;
  out_ += '\x02';
}

void PickleWriter::begin_dict() {
  out_ += kEmptyDict;
  out_ += kMark;
}
void PickleWriter::end_dict() { out_ += kSetItems; }
void PickleWriter::begin_list() {
  out_ += kEmptyList;
  out_ += kMark;
}
void PickleWriter::end_list() { out_ += kAppends; }
void PickleWriter::begin_tuple() { out_ += kMark; }
void PickleWriter::end_tuple() { out_ += kTuple; }

void PickleWriter::put_u32(uint32_t value) {
  for (int k = 0; k < 4; ++k) out_ += static_cast<char>((value >> (8 * k)) & 0xFF);
}

void PickleWriter::str(std::string_view text) {
  const std::string valid = valid_utf8(text);
  out_ += kBinUnicode;
  put_u32(static_cast<uint32_t>(valid.size()));
  out_ += valid;
}

void PickleWriter::interned(std::string_view text) {
  auto it = interned_.find(std::string(text));
  if (it != interned_.end()) {
    recall(it->second);
    return;
  }
  str(text);
  interned_.emplace(std::string(text), remember());
}

void PickleWriter::integer(int64_t value) {
  if (value >= 0 && value < 0x100) {
    out_ += kBinInt1;
    out_ += static_cast<char>(value);
  } else if (value >= 0 && value < 0x10000) {
    out_ += kBinInt2;
    out_ += static_cast<char>(value & 0xFF);
    out_ += static_cast<char>(value >> 8);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out_ += kBinInt;
    put_u32(static_cast<uint32_t>(static_cast<int32_t>(value)));
  } else {
    // LONG1: little-endian two's complement, 8 bytes (enough for any int64).
    out_ += kLong1;
    out_ += '\x08';
    for (int k = 0; k < 8; ++k) out_ += static_cast<char>((static_cast<uint64_t>(value) >> (8 * k)) & 0xFF);
  }
}

void PickleWriter::unsigned_integer(uint64_t value) {
  if (value <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(value));
  // Past int64: nine bytes, the last 0 so that the number stays positive.
  out_ += kLong1;
  out_ += '\x09';
  for (int k = 0; k < 8; ++k) out_ += static_cast<char>((value >> (8 * k)) & 0xFF);
  out_ += '\x00';
}

void PickleWriter::real(double value) {
  // BINFLOAT: the IEEE 754 double, big-endian.
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  out_ += kBinFloat;
  for (int k = 7; k >= 0; --k) out_ += static_cast<char>((bits >> (8 * k)) & 0xFF);
}

void PickleWriter::boolean(bool value) { out_ += value ? kNewTrue : kNewFalse; }
void PickleWriter::none() { out_ += kNone; }

uint32_t PickleWriter::remember() {
  const uint32_t number = next_memo_++;
  out_ += kLongBinPut;
  put_u32(number);
  return number;
}

void PickleWriter::recall(uint32_t number) {
  out_ += kLongBinGet;
  put_u32(number);
}

std::string PickleWriter::finish() {
  out_ += kStop;
  std::string result = std::move(out_);
  out_.clear();
  out_ += kProto;
  out_ += '\x02';
  next_memo_ = 0;
  interned_.clear();
  return result;
}

}  // namespace gmt::analysis
