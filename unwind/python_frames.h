// Python frames in allocation stacks: when the profiled process runs CPython, the native frames of the
// interpreter's eval loop are replaced by the Python frames (file, function, line) that loop was running.
//
// Read at allocation time from the allocating thread's own frame chain, which only that thread changes and
// which is frozen while the thread sits in our hook, whether or not it holds the GIL (PyTorch and ctypes
// release it around native calls). We never take the GIL, touch a reference count or create a Python
// object: the thread state comes from PyGILState_GetThisThreadState() (a TLS read), the frames are read by
// the struct offsets of the running CPython version, the line comes from PyCode_Addr2Line (pure
// computation over the code object's line table), and the names are copied out of the code object's
// compact unicode objects. Supported: CPython 3.9 to 3.13 built with the GIL (unwind/python_layouts.h); other
// versions and free-threaded builds get one note on stderr and native stacks as before. GMT_NO_PYTHON_FRAMES=1
// turns the feature off.
//
// Interleaving rule (docs/trace-format.md): native frames are read innermost first. Every frame inside
// _PyEval_EvalFrameDefault stands for one run of the eval loop and is replaced by the Python frames that
// run executes (innermost first, up to the frame the loop was entered with); every other frame inside the
// interpreter's own module (libpython, or the python executable when it is linked statically) is dropped.
// A run of interpreter frames in which no eval-loop frame was recognised gets the next run of Python frames
// at its outer end; Python frames left over when the native stack ends are appended at the outer end.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gmt::unwind {

// A Python frame travels through the stack table as a tagged value in place of a return address: user-space
// addresses never have bit 63 set. The rest of the value is the python frame's id (python_frames.id).
inline constexpr uintptr_t kPythonFrameTag = uintptr_t{1} << 63;
inline bool is_python_frame(uintptr_t pc) { return (pc & kPythonFrameTag) != 0; }
inline uint32_t python_frame_id(uintptr_t pc) { return static_cast<uint32_t>(pc & ~kPythonFrameTag); }

// The calling thread's Python frames as read from its frame chain, not yet named: runs of the eval loop, each
// frame's code object and position.
inline constexpr int kMaxPythonDepth = 64;  // frames kept per stack
struct RawPythonFrame {
  uintptr_t code;
  int32_t byte_offset;
};
struct PythonStack {
  RawPythonFrame frames[kMaxPythonDepth];
  int run_end[kMaxPythonDepth];  // run k is frames[run_end[k - 1] .. run_end[k])
  int frame_count = 0;
  int run_count = 0;

  void end_run() {
    if (run_count < kMaxPythonDepth) run_end[run_count++] = frame_count;
  }
  // Nothing more can be kept: neither a frame nor (3.9, 3.10: one per frame) a run.
  bool full() const { return frame_count == kMaxPythonDepth && run_count == kMaxPythonDepth; }
};

// A key of the calling thread's Python frame chain, for telling cheaply whether it is the one of an earlier stack
// (recorder/stacks.h, the stack memo): a hash of every frame's address, code object, position and run flags, and
// of each code object's file, name and line-table objects (a code object freed and another allocated at its
// address has other ones). Two chains with the same key are read, named and merged alike by the functions below.
// About a tenth of their cost: no frame is named. 0: no Python frames (or none readable).
uint64_t python_chain_key();

// Code objects' lifetimes, from CPython's code watchers (3.12+, PyCode_AddWatcher; registered by the in-process
// package, python/gpumemtrace_inprocess/code_watch.py, through recorder/python_code_watch.cpp). While they are
// watched, python_chain_key keys each code object by its address and the number of code objects destroyed so far
// instead of reading its file, name and line-table objects: an address seen again under the same count is the
// same live code object. That saves the reads of one to two cache lines per Python frame.
void start_watching_code_objects();
void note_code_object_destroyed();
bool code_objects_watched();

// Reads the calling thread's Python frames. False when there is nothing to merge (not a CPython process, feature
// off or unsupported version, no Python frames on this thread): the caller then keeps the native stack as it is.
bool read_python_stack(PythonStack& python);

// Merges `python` (read by read_python_stack on this thread) into `native` (n return addresses, innermost first)
// and writes the result to `out` (at most max_out entries). Returns the number written. Never takes a lock on the
// fast path (a first-seen frame interns its names once).
int merge_python_frames(const PythonStack& python, void* const* native, int n, uintptr_t* out, int max_out);

// Both: -1 when read_python_stack finds nothing to merge.
int merge_python_frames(void* const* native, int n, uintptr_t* out, int max_out);

}  // namespace gmt::unwind
