// Where CPython keeps what the Python-frame walk reads, per minor version (64-bit builds with the GIL, release
// ABI). Every offset is checked against that version's own headers by tests/python/python_layout_test.cpp,
// built once per CPython 3.9-3.13 whose headers are installed (pyenv).
#pragma once

#include <cstddef>

namespace gmt::unwind {

// What a thread's frame chain is made of.
enum class FrameChain {
  kFrameObjects,       // 3.9, 3.10: PyFrameObject (f_back, f_code, f_lasti)
  kInterpreterFrames,  // 3.11+: _PyInterpreterFrame (previous, f_code/f_executable, an instruction pointer)
};

// Where in the chain one run of the eval loop (one C-level call of _PyEval_EvalFrameDefault) ends.
enum class EvalLoopEntry {
  kEveryFrame,  // 3.9, 3.10: each Python call is its own call of the eval loop
  kEntryFlag,   // 3.11: the frame the loop was entered with has is_entry set
  kCStackShim,  // 3.12+: the loop pushes a FRAME_OWNED_BY_CSTACK frame on entry, below the frames it runs
};

inline constexpr int kAbsent = -1;  // a field this version does not have

struct PythonLayout {
  int minor;
  FrameChain chain;
  EvalLoopEntry entry;
  // The innermost frame: tstate->frame (3.9, 3.10), tstate->cframe->current_frame (3.11, 3.12),
  // tstate->current_frame (3.13).
  size_t thread_state_frame;  // PyThreadState.frame / .cframe / .current_frame
  int cframe_current_frame;   // _PyCFrame.current_frame; kAbsent: thread_state_frame is the frame itself
  size_t frame_code;          // f_code (3.9-3.12), f_executable (3.13: a code object, or None in the entry shim)
  size_t frame_previous;      // f_back (3.9, 3.10), previous (3.11+)
  // The frame's position: a _Py_CODEUNIT* into co_code_adaptive (3.11, 3.12: prev_instr; 3.13: instr_ptr), or
  // f_lasti (3.9: a byte offset into co_code; 3.10: a code-unit index; both -1 before the first instruction).
  size_t frame_position;
  int lasti_bytes_per_unit;     // f_lasti * this = the byte offset PyCode_Addr2Line takes (3.9: 1, 3.10: 2)
  int frame_owner;              // _PyInterpreterFrame.owner (char), kAbsent for frame objects
  int frame_is_entry;           // _PyInterpreterFrame.is_entry (3.11, bool), kAbsent elsewhere
  size_t code_filename;         // PyCodeObject.co_filename
  size_t code_name;             // co_qualname (3.11+), co_name (3.9, 3.10: no qualified name)
  size_t code_linetable;        // co_linetable (3.10+), co_lnotab (3.9): what the line is computed from
  int code_first_traceable;     // _co_firsttraceable (int, 3.11+), kAbsent before
  int code_adaptive;            // co_code_adaptive: _PyCode_CODE(code) (3.11+), kAbsent before
  int code_bytes;               // co_code, a bytes object (3.9, 3.10), kAbsent after
  size_t unicode_ascii_size;    // sizeof(PyASCIIObject): compact ASCII data follows it
  size_t unicode_compact_size;  // sizeof(PyCompactUnicodeObject): other compact data follows it
};

inline constexpr size_t kObjectTypeOffset = 8;      // PyObject.ob_type
inline constexpr size_t kVarObjectSizeOffset = 16;  // PyVarObject.ob_size: code units (3.11+ code), bytes (co_code)
inline constexpr size_t kUnicodeLengthOffset = 16;  // PyASCIIObject.length (code points)
inline constexpr size_t kUnicodeStateOffset = 32;   // PyASCIIObject.state: kind bits 2-4, compact 5, ascii 6
inline constexpr char kFrameOwnedByGenerator = 1;
inline constexpr char kFrameOwnedByCStack = 3;  // 3.12+

// Frame objects: PyObject_VAR_HEAD, then f_back and f_code in both versions.
inline constexpr PythonLayout kPython39{
    .minor = 9,
    .chain = FrameChain::kFrameObjects,
    .entry = EvalLoopEntry::kEveryFrame,
    .thread_state_frame = 24,
    .cframe_current_frame = kAbsent,
    .frame_code = 32,
    .frame_previous = 24,
    .frame_position = 104,
    .lasti_bytes_per_unit = 1,
    .frame_owner = kAbsent,
    .frame_is_entry = kAbsent,
    .code_filename = 104,
    .code_name = 112,
    .code_linetable = 120,
    .code_first_traceable = kAbsent,
    .code_adaptive = kAbsent,
    .code_bytes = 48,
    .unicode_ascii_size = 48,
    .unicode_compact_size = 72,
};

inline constexpr PythonLayout kPython310{
    .minor = 10,
    .chain = FrameChain::kFrameObjects,
    .entry = EvalLoopEntry::kEveryFrame,
    .thread_state_frame = 24,
    .cframe_current_frame = kAbsent,
    .frame_code = 32,
    .frame_previous = 24,
    .frame_position = 96,
    .lasti_bytes_per_unit = 2,
    .frame_owner = kAbsent,
    .frame_is_entry = kAbsent,
    .code_filename = 104,
    .code_name = 112,
    .code_linetable = 120,
    .code_first_traceable = kAbsent,
    .code_adaptive = kAbsent,
    .code_bytes = 48,
    .unicode_ascii_size = 48,
    .unicode_compact_size = 72,
};

inline constexpr PythonLayout kPython311{
    .minor = 11,
    .chain = FrameChain::kInterpreterFrames,
    .entry = EvalLoopEntry::kEntryFlag,
    .thread_state_frame = 56,
    .cframe_current_frame = 8,
    .frame_code = 32,
    .frame_previous = 48,
    .frame_position = 56,
    .lasti_bytes_per_unit = 2,
    .frame_owner = 69,
    .frame_is_entry = 68,
    .code_filename = 112,
    .code_name = 128,
    .code_linetable = 136,
    .code_first_traceable = 168,
    .code_adaptive = 184,
    .code_bytes = kAbsent,
    .unicode_ascii_size = 48,
    .unicode_compact_size = 72,
};

inline constexpr PythonLayout kPython312{
    .minor = 12,
    .chain = FrameChain::kInterpreterFrames,
    .entry = EvalLoopEntry::kCStackShim,
    .thread_state_frame = 56,
    .cframe_current_frame = 0,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_position = 56,
    .lasti_bytes_per_unit = 2,
    .frame_owner = 70,
    .frame_is_entry = kAbsent,
    .code_filename = 112,
    .code_name = 128,
    .code_linetable = 136,
    .code_first_traceable = 176,
    .code_adaptive = 192,
    .code_bytes = kAbsent,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
};

// 3.13: no _PyCFrame any more (the current frame is a field of the thread state), f_executable in place of
// f_code, instr_ptr (the instruction executing) in place of prev_instr; the line formula is unchanged
// (_PyInterpreterFrame_LASTI, times sizeof(_Py_CODEUNIT), through PyCode_Addr2Line).
inline constexpr PythonLayout kPython313{
    .minor = 13,
    .chain = FrameChain::kInterpreterFrames,
    .entry = EvalLoopEntry::kCStackShim,
    .thread_state_frame = 72,
    .cframe_current_frame = kAbsent,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_position = 56,
    .lasti_bytes_per_unit = 2,
    .frame_owner = 70,
    .frame_is_entry = kAbsent,
    .code_filename = 112,
    .code_name = 128,
    .code_linetable = 136,
    .code_first_traceable = 184,
    .code_adaptive = 200,
    .code_bytes = kAbsent,
    .unicode_ascii_size = 40,
    .unicode_compact_size = 56,
};

inline constexpr const char* kSupportedPythonVersions = "3.9, 3.10, 3.11, 3.12, 3.13";

// nullptr for a version without a layout.
inline const PythonLayout* python_layout_for(int minor) {
  switch (minor) {
    case 9: return &kPython39;
    case 10: return &kPython310;
    case 11: return &kPython311;
    case 12: return &kPython312;
    case 13: return &kPython313;
    default: return nullptr;
  }
}

}  // namespace gmt::unwind
