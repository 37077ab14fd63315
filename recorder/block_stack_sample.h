// Sampled stacks for a framework's blocks (`run --sample-block-stacks SIZE`, GMT_BLOCK_STACK_SAMPLE): a block of at
// least SIZE bytes takes its stack, as every block does by default; smaller ones take theirs one per SIZE bytes
// allocated on average, and the others are recorded without a stack. Every block is still recorded: addresses,
// sizes, times, leaks and peaks stay exact; only the attribution of small blocks is a sample.
//
// Why: the stack is most of a block event's host time (recorder/stacks.h; docs/benchmarks.md, issue 33), and a
// host-bound step makes hundreds of block events. A service that leaks 8 MiB per request leaks it in blocks the
// sample always names; many small blocks are named in proportion to the bytes they take.
//
// How: a Poisson process over the bytes each thread allocates in small blocks, as heap profilers sample (the
// distance to the next sampled byte is exponential with mean SIZE): no allocation pattern that repeats with a period
// can hide from it, and a block's chance of a stack is 1 - exp(-size / SIZE).
#pragma once

#include <cstdint>

#include "recorder/cache_hints.h"
#include "recorder/settings.h"

namespace gmt::recorder {

// Bytes this thread allocates in small blocks before the next one takes its stack; 0: not drawn yet.
inline thread_local int64_t t_bytes_before_block_stack __attribute__((tls_model("initial-exec"))) = 0;

// The distance to the next sampled byte, drawn from this thread's generator: exponential with mean `every`, at
// least 1.
int64_t next_block_stack_distance(uint64_t every);

// Whether a framework's block of `size` bytes takes its stack.
GMT_HOT inline bool take_block_stack(uint64_t size) {
  const uint64_t every = settings().block_stack_sample_bytes;
  if (__builtin_expect(every == 0 || size >= every, 1)) return true;
  int64_t left = t_bytes_before_block_stack;
  if (__builtin_expect(left == 0, 0)) left = next_block_stack_distance(every);  // the thread's first small block
  left -= static_cast<int64_t>(size);
  if (left > 0) {
    t_bytes_before_block_stack = left;
    return false;
  }
  t_bytes_before_block_stack = next_block_stack_distance(every);
  return true;
}

// Starts this thread's generator at `seed` and its distance afresh, for tests that count what a sample takes.
void seed_block_stack_sample_for_testing(uint64_t seed);

}  // namespace gmt::recorder
