// The interning half of the Python frames (unwind/python_frames.h reads them out of the interpreter): each distinct
// (file, function, line) gets an id, the python_frames row of the trace.
#pragma once

#include <cstdint>

namespace gmt::recorder {

// One row of the python_frames table: names are ids of the interned strings (recorder/strings.h).
struct PythonFrameRow {
  uint32_t file_id = 0;
  uint32_t function_id = 0;
  int32_t line = 0;  // 0: unknown
};

// Past this many distinct (file, function, line) rows, interning returns 0 and the frame is left out.
inline constexpr uint32_t kMaxPythonFrames = 1u << 20;

// The id of `row` (0 for a full table). Thread-safe and fork-safe; a leaf lock of its own: never call it
// while holding the recorder's lock.
uint32_t intern_python_frame(const PythonFrameRow& row);

// Python frames interned so far: ids 1..python_frame_count(). Read by the writer without a lock (acquire);
// every string a row names was interned before the row was published.
uint32_t python_frame_count();
PythonFrameRow python_frame_row(uint32_t id);

}  // namespace gmt::recorder
