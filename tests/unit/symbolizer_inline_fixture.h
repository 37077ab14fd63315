// A function always inlined, in a header of its own: the code inlined from here into symbolizer_test.cpp's
// inline_caller has this header's lines in the line table, and the symbolizer must name the frame by the
// caller's own line (the call site), as the function it names is the caller.
#pragma once

namespace gmt_symbolizer_fixture {

void* leaf();

__attribute__((always_inline)) inline void* inlined_leaf_call() {
  void* pc = leaf();              // the return address lies in code from this header...
  asm volatile("" ::: "memory");  // ...kept out of tail position, so it stays a call
  return pc;
}

}  // namespace gmt_symbolizer_fixture
