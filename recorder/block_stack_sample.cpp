#include "recorder/block_stack_sample.h"

#include <cmath>

namespace gmt::recorder {
namespace {

thread_local uint64_t t_block_sample_random __attribute__((tls_model("initial-exec"))) = 0;

// splitmix64: a full 64-bit period from any seed, so that a thread's distances never cycle within a run.
uint64_t next_random() {
  uint64_t& state = t_block_sample_random;
  if (state == 0) state = reinterpret_cast<uintptr_t>(&state) * 0x9e3779b97f4a7c15ull;  // per thread
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

GMT_COLD int64_t next_block_stack_distance(uint64_t every) {
  const double uniform = static_cast<double>((next_random() >> 11) + 1) * 0x1.0p-53;  // in (0, 1]
  const double distance = -std::log(uniform) * static_cast<double>(every);
  if (!(distance >= 1.0)) return 1;
  return distance > 0x1.0p62 ? int64_t{1} << 62 : static_cast<int64_t>(distance);
}

void seed_block_stack_sample_for_testing(uint64_t seed) {
  t_block_sample_random = seed;
  t_bytes_before_block_stack = 0;
}

}  // namespace gmt::recorder
