// Which GPU allocator the leaked memory came through (PyTorch's caching allocator and its variants, CuPy's
// pool, JAX/XLA's BFC allocator), named from the leak groups' call stacks, so that memory an allocator keeps
// cached (freed by the app, still reserved by the allocator) is not mistaken for a leak; each finding says
// how to release the cache. Rules in docs/analysis.md.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "analysis/model/report.h"

namespace gmt::analysis {

struct AllocatorFinding {
  std::string id;    // "pytorch_caching", "pytorch_expandable_segments", "pytorch_cuda_malloc_async",
                     // "cupy_pool", "jax_xla"
  std::string name;  // for people: "PyTorch caching allocator"
  uint64_t leaked_bytes = 0;
  uint64_t leaked_allocations = 0;
  uint64_t leak_groups = 0;
  std::string advice;  // why those bytes need not be a leak, and how to release them
};

// Allocators named by the stacks of `leaks`, most leaked bytes first; groups through no known allocator are
// left out. A group counts for the first rule that matches one of its frames (innermost first).
std::vector<AllocatorFinding> name_allocators(const std::vector<LeakGroup>& leaks);

// JAX/XLA's BFC arena (docs/analysis.md "JAX/XLA's preallocated arena"): the CUDA-level allocations XLA's BFC
// allocator makes (one for the preallocated ~75% of the GPU, or a few as it grows) are never given back before exit
// and record none of the buffers JAX hands out inside them. Live at exit they are cached by the arena, not leaked.
// A stack is the arena's when its allocator is JAX/XLA (the rule of name_allocators, through a native module of
// XLA's) and either a frame names tsl::BFCAllocator, or no frame of XLA's modules has a name (their symbols
// stripped: then the arena cannot be told from XLA_PYTHON_CLIENT_ALLOCATOR=platform's buffers, and is assumed).
// XLA frames with names but none of the BFC allocator (the platform or cuda_async allocator) are buffers: leaks.
bool is_xla_arena(const Stack& stack);

// The analysis pass's tally of what the arena held at exit (one per pass, a cache per raw stack id).
class XlaArenaAtExit {
 public:
  // Whether the live allocation of `size` bytes with this stack is the arena's (then counted here, not leaked).
  bool take(int64_t stack_id, const Stack& stack, uint64_t size);
  bool is_arena(int64_t stack_id) const {
    auto it = by_stack_.find(stack_id);
    return it != by_stack_.end() && it->second;
  }
  // Report::heaps gains the arena's entry (opaque: its buffers unknown) and the totals its bytes as cached at exit.
  void add_to(Report& report) const;

 private:
  std::unordered_map<int64_t, bool> by_stack_;
  uint64_t bytes_ = 0;
  uint64_t allocations_ = 0;
};

}  // namespace gmt::analysis
