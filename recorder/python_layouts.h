// Where CPython keeps what the Python-frame walk reads, per minor version (64-bit builds, release ABI).
// 3.11 is checked against the interpreter's own headers by tests/unit/python_layout_test.cpp; 3.12 follows
// CPython's 3.12 branch (Include/cpython/pystate.h, Include/internal/pycore_frame.h, Include/cpython/code.h,
// Include/cpython/unicodeobject.h) and is checked on the GPU machine's 3.12 (tests/gpu/test_gpu_python.py).
#pragma once

#include <cstddef>

namespace gmt::recorder {

struct PythonLayout {
  int minor;
  size_t thread_state_cframe;   // PyThreadState.cframe
  size_t cframe_current_frame;  // _PyCFrame.current_frame
  size_t frame_code;            // _PyInterpreterFrame.f_code
  size_t frame_previous;        // _PyInterpreterFrame.previous
  size_t frame_prev_instr;      // _PyInterpreterFrame.prev_instr
  size_t frame_owner;           // _PyInterpreterFrame.owner
  int frame_is_entry;           // _PyInterpreterFrame.is_entry (3.11), -1 when absent
  bool has_cstack_shim;         // 3.12: the eval loop pushes a FRAME_OWNED_BY_CSTACK frame on entry
  size_t code_filename;         // PyCodeObject.co_filename
  size_t code_qualname;         // PyCodeObject.co_qualname
  size_t code_linetable;        // PyCodeObject.co_linetable
  size_t code_first_traceable;  // PyCodeObject._co_firsttraceable (int)
  size_t code_adaptive;         // PyCodeObject.co_code_adaptive: _PyCode_CODE(code)
  size_t unicode_ascii_size;    // sizeof(PyASCIIObject): compact ASCII data follows it
  size_t unicode_compact_size;  // sizeof(PyCompactUnicodeObject): other compact data follows it
};

inline constexpr size_t kObjectTypeOffset = 8;      // PyObject.ob_type
inline constexpr size_t kVarObjectSizeOffset = 16;  // PyVarObject.ob_size: code units of a code object
inline constexpr size_t kUnicodeLengthOffset = 16;  // PyASCIIObject.length (code points)
inline constexpr size_t kUnicodeStateOffset = 32;   // PyASCIIObject.state: kind bits 2-4, compact 5, ascii 6
inline constexpr char kFrameOwnedByGenerator = 1;
inline constexpr char kFrameOwnedByCStack = 3;  // 3.12+

inline constexpr PythonLayout kPython311{
    .minor = 11,
    .thread_state_cframe = 56,
    .cframe_current_frame = 8,
    .frame_code = 32,
    .frame_previous = 48,
    .frame_prev_instr = 56,
    .frame_owner = 69,
    .frame_is_entry = 68,
    .has_cstack_shim = false,
    .code_filename = 112,
    .code_qualname = 128,
    .code_linetable = 136,
    .code_first_traceable = 168,
    .code_adaptive = 184,
    .unicode_ascii_size = 48,
    .unicode_compact_size = 72,
};

inline constexpr PythonLayout kPython312{
    .minor = 12,
    .thread_state_cframe = 56,
    .cframe_current_frame = 0,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_prev_instr = 56,
    .frame_owner = 70,
    .frame_is_entry = -1,
    .has_cstack_shim = true,
    .code_filename = 112,
    .code_qualname = 128,
    .code_linetable = 136,
    .code_first_traceable = 176,
    .code_adaptive = 192,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
};

// nullptr for a version without a layout.
inline const PythonLayout* python_layout_for(int minor) {
  if (minor == 11) return &kPython311;
  if (minor == 12) return &kPython312;
  return nullptr;
}

}  // namespace gmt::recorder
