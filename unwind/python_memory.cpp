#include "unwind/python_memory.h"

#include <algorithm>

namespace gmt::unwind {

size_t copy_python_str(uintptr_t text, uintptr_t unicode_type, const PythonLayout& l, char* buf, size_t capacity) {
  if (!plausible(text) || read_at<uintptr_t>(text, kObjectTypeOffset) != unicode_type) return 0;
  auto length = read_at<int64_t>(text, kUnicodeLengthOffset);
  auto state = read_at<uint32_t>(text, kUnicodeStateOffset);
  unsigned kind = (state >> 2) & 7;
  bool compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0) return 0;
  if (ascii) {
    size_t n = std::min<size_t>(static_cast<size_t>(length), capacity);
    std::memcpy(buf, reinterpret_cast<const void*>(text + l.unicode_ascii_size), n);
    return n;
  }
  if (kind != 1 && kind != 2 && kind != 4) return 0;
  auto data = reinterpret_cast<const unsigned char*>(text + l.unicode_compact_size);
  size_t out = 0;
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c = kind == 1   ? data[i]
                 : kind == 2 ? read_at<uint16_t>(text + l.unicode_compact_size, i * 2)
                             : read_at<uint32_t>(text + l.unicode_compact_size, i * 4);
    char encoded[4];
    size_t n;
    if (c < 0x80) {
      encoded[0] = static_cast<char>(c), n = 1;
    } else if (c < 0x800) {
      encoded[0] = static_cast<char>(0xC0 | c >> 6), encoded[1] = static_cast<char>(0x80 | (c & 0x3F)), n = 2;
    } else if (c < 0x10000) {
      encoded[0] = static_cast<char>(0xE0 | c >> 12), encoded[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      encoded[2] = static_cast<char>(0x80 | (c & 0x3F)), n = 3;
    } else {
      encoded[0] = static_cast<char>(0xF0 | c >> 18), encoded[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      encoded[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3F)), encoded[3] = static_cast<char>(0x80 | (c & 0x3F));
      n = 4;
    }
    if (out + n > capacity) break;
    std::memcpy(buf + out, encoded, n);
    out += n;
  }
  return out;
}

}  // namespace gmt::unwind
