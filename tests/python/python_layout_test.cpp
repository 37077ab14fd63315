// The struct offsets the Python-frame walk uses (unwind/python_layouts.h) against the headers of one CPython
// version: built once per version whose headers are installed (tests/python/CMakeLists.txt), so that a layout
// table that disagrees with the real interpreter fails here. Py_BUILD_CORE (3.11+) comes from the build: the
// interpreter frame is in the internal headers.
#include <Python.h>
#include <frameobject.h>
#if PY_MINOR_VERSION >= 11
#include <internal/pycore_frame.h>
#endif

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include "unwind/python_layouts.h"

namespace gmt::unwind {
namespace {

const PythonLayout& layout() {
  const PythonLayout* found = python_layout_for(PY_MINOR_VERSION);
  if (!found) throw std::runtime_error("no layout for this CPython version");
  return *found;
}

TEST(PythonLayoutTest, HasThisVersion) {
  ASSERT_NE(python_layout_for(PY_MINOR_VERSION), nullptr) << "no layout for CPython 3." << PY_MINOR_VERSION;
  EXPECT_EQ(layout().minor, PY_MINOR_VERSION);
  EXPECT_NE(std::strstr(kSupportedPythonVersions, "3." Py_STRINGIFY(PY_MINOR_VERSION)), nullptr);
}

#if PY_MINOR_VERSION <= 10
TEST(PythonLayoutTest, FrameObjects) {
  const PythonLayout& l = layout();
  EXPECT_EQ(l.chain, FrameChain::kFrameObjects);
  EXPECT_EQ(l.entry, EvalLoopEntry::kEveryFrame);
  EXPECT_EQ(l.thread_state_frame, offsetof(PyThreadState, frame));
  EXPECT_EQ(l.cframe_current_frame, kAbsent);
  EXPECT_EQ(l.frame_code, offsetof(PyFrameObject, f_code));
  EXPECT_EQ(l.frame_previous, offsetof(PyFrameObject, f_back));
  EXPECT_EQ(l.frame_position, offsetof(PyFrameObject, f_lasti));
  EXPECT_EQ(sizeof(PyFrameObject::f_lasti), sizeof(int32_t));
  // PyFrame_GetLineNumber: PyCode_Addr2Line(f_code, f_lasti) in 3.9 (a byte offset), f_lasti * 2 in 3.10.
  EXPECT_EQ(l.lasti_bytes_per_unit, PY_MINOR_VERSION == 9 ? 1 : static_cast<int>(sizeof(_Py_CODEUNIT)));
  EXPECT_EQ(l.frame_owner, kAbsent);
  EXPECT_EQ(l.frame_is_entry, kAbsent);
}

TEST(PythonLayoutTest, CodeObjects) {
  const PythonLayout& l = layout();
  EXPECT_EQ(l.code_filename, offsetof(PyCodeObject, co_filename));
  EXPECT_EQ(l.code_name, offsetof(PyCodeObject, co_name));  // no co_qualname before 3.11
#if PY_MINOR_VERSION == 9
  EXPECT_EQ(l.code_linetable, offsetof(PyCodeObject, co_lnotab));
#else
  EXPECT_EQ(l.code_linetable, offsetof(PyCodeObject, co_linetable));
#endif
  EXPECT_EQ(l.code_bytes, static_cast<int>(offsetof(PyCodeObject, co_code)));
  EXPECT_EQ(l.code_first_traceable, kAbsent);
  EXPECT_EQ(l.code_adaptive, kAbsent);
  EXPECT_EQ(kVarObjectSizeOffset, offsetof(PyBytesObject, ob_base.ob_size));
}
#else
TEST(PythonLayoutTest, InterpreterFrames) {
  const PythonLayout& l = layout();
  EXPECT_EQ(l.chain, FrameChain::kInterpreterFrames);
#if PY_MINOR_VERSION <= 12
  EXPECT_EQ(l.thread_state_frame, offsetof(PyThreadState, cframe));
  EXPECT_EQ(l.cframe_current_frame, static_cast<int>(offsetof(_PyCFrame, current_frame)));
  EXPECT_EQ(l.frame_code, offsetof(_PyInterpreterFrame, f_code));
  EXPECT_EQ(l.frame_position, offsetof(_PyInterpreterFrame, prev_instr));
#else
  EXPECT_EQ(l.thread_state_frame, offsetof(PyThreadState, current_frame));
  EXPECT_EQ(l.cframe_current_frame, kAbsent);
  EXPECT_EQ(l.frame_code, offsetof(_PyInterpreterFrame, f_executable));
  EXPECT_EQ(l.frame_position, offsetof(_PyInterpreterFrame, instr_ptr));
#endif
  EXPECT_EQ(l.frame_previous, offsetof(_PyInterpreterFrame, previous));
  EXPECT_EQ(l.frame_owner, static_cast<int>(offsetof(_PyInterpreterFrame, owner)));
  EXPECT_EQ(sizeof(_PyInterpreterFrame::owner), sizeof(char));
  EXPECT_EQ(l.lasti_bytes_per_unit, static_cast<int>(sizeof(_Py_CODEUNIT)));
#if PY_MINOR_VERSION == 11
  EXPECT_EQ(l.entry, EvalLoopEntry::kEntryFlag);
  EXPECT_EQ(l.frame_is_entry, static_cast<int>(offsetof(_PyInterpreterFrame, is_entry)));
  EXPECT_EQ(sizeof(_PyInterpreterFrame::is_entry), sizeof(char));
#else
  EXPECT_EQ(l.entry, EvalLoopEntry::kCStackShim);
  EXPECT_EQ(l.frame_is_entry, kAbsent);
  EXPECT_EQ(kFrameOwnedByCStack, FRAME_OWNED_BY_CSTACK);
#endif
  EXPECT_EQ(kFrameOwnedByGenerator, FRAME_OWNED_BY_GENERATOR);
}

TEST(PythonLayoutTest, CodeObjects) {
  const PythonLayout& l = layout();
  EXPECT_EQ(l.code_filename, offsetof(PyCodeObject, co_filename));
  EXPECT_EQ(l.code_name, offsetof(PyCodeObject, co_qualname));
  EXPECT_EQ(l.code_linetable, offsetof(PyCodeObject, co_linetable));
  EXPECT_EQ(l.code_first_traceable, static_cast<int>(offsetof(PyCodeObject, _co_firsttraceable)));
  EXPECT_EQ(sizeof(PyCodeObject::_co_firsttraceable), sizeof(int32_t));
  EXPECT_EQ(l.code_adaptive, static_cast<int>(offsetof(PyCodeObject, co_code_adaptive)));
  EXPECT_EQ(l.code_bytes, kAbsent);
  EXPECT_EQ(sizeof(_Py_CODEUNIT), 2u);  // ob_size counts code units: the walk doubles it
}
#endif

TEST(PythonLayoutTest, ObjectsAndText) {
  const PythonLayout& l = layout();
  EXPECT_EQ(l.unicode_ascii_size, sizeof(PyASCIIObject));
  EXPECT_EQ(l.unicode_compact_size, sizeof(PyCompactUnicodeObject));
  EXPECT_EQ(kObjectTypeOffset, offsetof(PyObject, ob_type));
  EXPECT_EQ(kVarObjectSizeOffset, offsetof(PyVarObject, ob_size));
  EXPECT_EQ(kUnicodeLengthOffset, offsetof(PyASCIIObject, length));
  EXPECT_EQ(kUnicodeStateOffset, offsetof(PyASCIIObject, hash) + sizeof(Py_hash_t));
}

// The state bits the walk decodes by hand: kind at bits 2-4, compact at 5, ascii at 6.
TEST(PythonLayoutTest, UnicodeStateBits) {
  PyASCIIObject text{};
  text.state.kind = PyUnicode_2BYTE_KIND;
  text.state.compact = 1;
  text.state.ascii = 0;
  uint32_t state = 0;
  std::memcpy(&state, reinterpret_cast<const char*>(&text) + kUnicodeStateOffset, sizeof state);
  EXPECT_EQ((state >> 2) & 7, static_cast<uint32_t>(PyUnicode_2BYTE_KIND));
  EXPECT_EQ((state >> 5) & 1, 1u);
  EXPECT_EQ((state >> 6) & 1, 0u);
  text.state.ascii = 1;
  text.state.kind = PyUnicode_1BYTE_KIND;
  std::memcpy(&state, reinterpret_cast<const char*>(&text) + kUnicodeStateOffset, sizeof state);
  EXPECT_EQ((state >> 2) & 7, static_cast<uint32_t>(PyUnicode_1BYTE_KIND));
  EXPECT_EQ((state >> 6) & 1, 1u);
}

}  // namespace
}  // namespace gmt::unwind
