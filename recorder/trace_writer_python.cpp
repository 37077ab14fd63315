// The writer's part of the Python frames (schema v5): the python_frames rows, and stack_frames rows that
// name one of them instead of a return address.
#include "recorder/python_frame_table.h"
#include "recorder/trace_writer.h"
#include "unwind/python_frames.h"

namespace gmt::recorder {

// Rows python_frames_written_+1..count. The strings they name were written just before (write_batch).
bool TraceWriter::write_new_python_frames(uint32_t count) {
  bool ok = true;
  for (uint32_t id = python_frames_written_ + 1; id <= count; ++id) {
    PythonFrameRow row = python_frame_row(id);
    sqlite3_bind_int64(insert_python_frame_, 1, id);
    sqlite3_bind_int64(insert_python_frame_, 2, row.file_id);
    sqlite3_bind_int64(insert_python_frame_, 3, row.function_id);
    sqlite3_bind_int64(insert_python_frame_, 4, row.line);
    ok &= step_and_reset(insert_python_frame_);
  }
  return ok;
}

// Binds level, pc and python_frame_id of insert_frame_ (stack_id is bound by the caller): a Python frame
// has pc 0 and its python_frames.id, a native frame its return address and python_frame_id 0.
void TraceWriter::bind_frame(size_t level, uintptr_t pc) {
  bool python = unwind::is_python_frame(pc);
  sqlite3_bind_int64(insert_frame_, 2, static_cast<sqlite3_int64>(level));
  sqlite3_bind_int64(insert_frame_, 3, python ? 0 : static_cast<sqlite3_int64>(pc));
  sqlite3_bind_int64(insert_frame_, 4, python ? unwind::python_frame_id(pc) : 0);
}

}  // namespace gmt::recorder
