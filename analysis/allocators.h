// Which GPU allocator the leaked memory came through (PyTorch's caching allocator and its variants, CuPy's
// pool, JAX/XLA's BFC allocator), named from the leak groups' call stacks, so that memory an allocator keeps
// cached (freed by the app, still reserved by the allocator) is not mistaken for a leak; each finding says
// how to release the cache. Rules in docs/analysis.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model.h"

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

}  // namespace gmt::analysis
