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

// The eval loop's stand-in, alone in its section: the linker's __start_/__stop_ symbols bound its code.
__attribute__((noinline, section("gmt_memo_cut_stand_in"))) void stand_in(PlaceCallback callback, void* argument) {
  callback(argument);
  asm volatile("" ::: "memory");
}

__attribute__((noinline)) void gmt_path_x(PlaceCallback callback, void* argument) {
  volatile long pad[4] = {1, 2, 3, 4};
  stand_in(callback, argument);
  asm volatile("" : : "r"(pad[0]) : "memory");
}

__attribute__((noinline)) void gmt_path_y(PlaceCallback callback, void* argument) {
  volatile long pad[4] = {4, 3, 2, 1};
  stand_in(callback, argument);
  asm volatile("" : : "r"(pad[3]) : "memory");
}

}  // namespace

extern "C" const char __start_gmt_memo_cut_stand_in[];
extern "C" const char __stop_gmt_memo_cut_stand_in[];

void call_through_cut(int y, PlaceCallback callback, void* argument) {
  if (y) {
    gmt_path_y(callback, argument);
  } else {
    gmt_path_x(callback, argument);
  }
  asm volatile("" ::: "memory");
}

void walk_cut_stand_in_range(uintptr_t* begin, uintptr_t* end) {
  *begin = reinterpret_cast<uintptr_t>(__start_gmt_memo_cut_stand_in);
  *end = reinterpret_cast<uintptr_t>(__stop_gmt_memo_cut_stand_in);
}

void call_from_place(int place, PlaceCallback callback, void* argument) {
  if (place % 2) {
    from_b(place / 2, callback, argument);
  } else {
    from_a(place / 2, callback, argument);
  }
  asm volatile("" ::: "memory");
}
