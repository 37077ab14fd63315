// Reading a CPython interpreter's memory from inside the profiled process, without the GIL and without trusting
// what is read: every pointer taken out of the interpreter's structures is checked before use, so that a layout
// that does not match (an unexpected build) ends the walk instead of crashing the app.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "unwind/python_layouts.h"

namespace gmt::unwind {

// A user-space, 8-byte aligned address: what every object and frame pointer of a 64-bit CPython is.
inline bool plausible(uintptr_t p) { return p >= 4096 && p < (uintptr_t{1} << 47) && (p & 7) == 0; }

template <typename T>
T read_at(uintptr_t base, size_t offset) {
  T value;
  std::memcpy(&value, reinterpret_cast<const void*>(base + offset), sizeof(T));
  return value;
}

// Copies a str object's text (its ob_type must be unicode_type) as UTF-8 into buf; returns the bytes written
// (0 when it cannot be read). Only compact strings are read: code object names always are.
size_t copy_python_str(uintptr_t text, uintptr_t unicode_type, const PythonLayout& layout, char* buf, size_t capacity);

}  // namespace gmt::unwind
