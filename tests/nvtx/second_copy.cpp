// A shared library with its own NVTX copy (nvtx3 is header-only: every library that includes it has one), for
// the test that every copy is captured once (tests/nvtx/nvtx_copies.cpp).
#include <nvtx3/nvToolsExt.h>

// Pushes and pops "library range" `count` times; returns the level the last push returned.
extern "C" __attribute__((visibility("default"))) int second_copy_ranges(int count) {
  int level = -100;
  for (int i = 0; i < count; ++i) {
    level = nvtxRangePushA("library range");
    nvtxRangePop();
  }
  return level;
}
