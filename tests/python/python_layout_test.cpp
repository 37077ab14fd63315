// The struct offsets the Python-frame walk uses (recorder/python_layouts.h) against the headers of the
// CPython this test is built with: a layout table that disagrees with the real interpreter fails here.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>

#include "recorder/python_layouts.h"

namespace gmt::recorder {
namespace {

TEST(PythonLayoutTest, MatchesTheInterpreterHeaders) {
  const PythonLayout* layout = python_layout_for(PY_MINOR_VERSION);
  ASSERT_NE(layout, nullptr) << "no layout for CPython 3." << PY_MINOR_VERSION;
  EXPECT_EQ(layout->thread_state_cframe, offsetof(PyThreadState, cframe));
  EXPECT_EQ(layout->cframe_current_frame, offsetof(_PyCFrame, current_frame));
  EXPECT_EQ(layout->frame_code, offsetof(_PyInterpreterFrame, f_code));
  EXPECT_EQ(layout->frame_previous, offsetof(_PyInterpreterFrame, previous));
  EXPECT_EQ(layout->frame_prev_instr, offsetof(_PyInterpreterFrame, prev_instr));
  EXPECT_EQ(layout->frame_owner, offsetof(_PyInterpreterFrame, owner));
#if PY_MINOR_VERSION == 11
  EXPECT_EQ(layout->frame_is_entry, static_cast<int>(offsetof(_PyInterpreterFrame, is_entry)));
  EXPECT_FALSE(layout->has_cstack_shim);
#else
  EXPECT_EQ(layout->frame_is_entry, -1);
  EXPECT_TRUE(layout->has_cstack_shim);
  EXPECT_EQ(kFrameOwnedByCStack, FRAME_OWNED_BY_CSTACK);
#endif
  EXPECT_EQ(kFrameOwnedByGenerator, FRAME_OWNED_BY_GENERATOR);
  EXPECT_EQ(layout->code_filename, offsetof(PyCodeObject, co_filename));
  EXPECT_EQ(layout->code_qualname, offsetof(PyCodeObject, co_qualname));
  EXPECT_EQ(layout->code_linetable, offsetof(PyCodeObject, co_linetable));
  EXPECT_EQ(layout->code_first_traceable, offsetof(PyCodeObject, _co_firsttraceable));
  EXPECT_EQ(layout->code_adaptive, offsetof(PyCodeObject, co_code_adaptive));
  EXPECT_EQ(layout->unicode_ascii_size, sizeof(PyASCIIObject));
  EXPECT_EQ(layout->unicode_compact_size, sizeof(PyCompactUnicodeObject));
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
}

}  // namespace
}  // namespace gmt::recorder
