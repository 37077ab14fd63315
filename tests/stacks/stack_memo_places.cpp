// Call sites for tests/stacks/stack_memo_test.cpp, in a library of their own: the recorder cuts the frames of the
// module it is linked into from the top of every stack (recorder/stacks.cpp, own_code), which for that test is
// the test program itself.
#include "tests/stacks/stack_memo_places.h"

namespace {

__attribute__((noinline)) void from_a(int depth, PlaceCallback callback, void* argument) {
  if (depth == 0) {
    callback(argument);
  } else {
    from_a(depth - 1, callback, argument);
  }
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void from_b(int depth, PlaceCallback callback, void* argument) {
  volatile long unlike_from_a[2] = {depth, 1};  // not folded into from_a, which would be identical code
  if (depth == unlike_from_a[1] - 1) {
    callback(argument);
  } else {
    from_b(depth - 1, callback, argument);
  }
  asm volatile("" ::: "memory");
}

}  // namespace

void call_from_place(int place, PlaceCallback callback, void* argument) {
  if (place % 2) {
    from_b(place / 2, callback, argument);
  } else {
    from_a(place / 2, callback, argument);
  }
  asm volatile("" ::: "memory");
}
