// The interning half of the Python frames (recorder/python_frames.h reads them out of the interpreter).
#pragma once

#include <cstdint>

#include "recorder/python_frames.h"

namespace gmt::recorder {

// Past this many distinct (file, function, line) rows, interning returns 0 and the frame is left out.
inline constexpr uint32_t kMaxPythonFrames = 1u << 20;

// The id of `row` (0 for a full table). Thread-safe and fork-safe; a leaf lock of its own: never call it
// while holding the recorder's lock.
uint32_t intern_python_frame(const PythonFrameRow& row);

}  // namespace gmt::recorder
