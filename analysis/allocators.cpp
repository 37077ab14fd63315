#include "analysis/allocators.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace gmt::analysis {
namespace {

enum class Family { None, PyTorch, CuPy, Jax };

std::string_view basename_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The allocator family a frame belongs to: by its native module, or by a Python frame's file.
Family family_of(const Frame& frame) {
  if (frame.python) {
    std::string_view file = frame.file ? std::string_view(*frame.file) : std::string_view();
    if (file.find("/torch/") != std::string_view::npos) return Family::PyTorch;
    if (file.find("/cupy/") != std::string_view::npos || file.find("/cupy_backends/") != std::string_view::npos) {
      return Family::CuPy;
    }
    if (file.find("/jax/") != std::string_view::npos || file.find("/jaxlib/") != std::string_view::npos) {
      return Family::Jax;
    }
    return Family::None;
  }
  if (!frame.module) return Family::None;
  std::string_view module = *frame.module;
  std::string_view base = basename_of(module);
  if (base.starts_with("libc10_cuda") || base.starts_with("libtorch_cuda")) return Family::PyTorch;
  if (module.find("/cupy/") != std::string_view::npos || module.find("/cupy_backends/") != std::string_view::npos ||
      base.starts_with("libcupy")) {
    return Family::CuPy;
  }
  if (module.find("/jaxlib/") != std::string_view::npos || base.find("xla") != std::string_view::npos) {
    return Family::Jax;
  }
  return Family::None;
}

bool has_api(const LeakGroup& group, std::initializer_list<schema::Api> apis) {
  return std::any_of(group.apis.begin(), group.apis.end(),
                     [&](schema::Api api) { return std::find(apis.begin(), apis.end(), api) != apis.end(); });
}

AllocatorFinding describe(const LeakGroup& group, Family family) {
  using schema::Api;
  AllocatorFinding f;
  switch (family) {
    case Family::PyTorch:
      if (has_api(group, {Api::cuMemCreate, Api::cuMemMap})) {
        f.id = "pytorch_expandable_segments";
        f.name = "PyTorch caching allocator, expandable segments";
        f.advice =
            "PyTorch maps physical memory into its expandable segments (cuMemCreate/cuMemMap) and keeps it mapped "
            "after tensors are freed: bytes still mapped at exit are cached, not necessarily leaked. "
            "torch.cuda.empty_cache() unmaps and releases what no tensor uses; what remains is held by live tensors.";
      } else if (has_api(group, {Api::cudaMallocAsync, Api::cudaMallocFromPoolAsync, Api::cuMemAllocAsync,
                                 Api::cuMemAllocFromPoolAsync})) {
        f.id = "pytorch_cuda_malloc_async";
        f.name = "PyTorch cudaMallocAsync backend";
        f.advice =
            "with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync freed tensors go back to the CUDA memory pool, "
            "which keeps the memory reserved: torch.cuda.empty_cache() trims the pool; allocations never freed "
            "with cudaFreeAsync are held by live tensors.";
      } else {
        f.id = "pytorch_caching";
        f.name = "PyTorch caching allocator";
        f.advice =
            "PyTorch keeps the memory of freed tensors reserved in its segments for reuse and frees segments only "
            "when asked: segments still reserved at exit are cached, not necessarily leaked. Call "
            "torch.cuda.empty_cache() before exit (torch.cuda.memory_reserved() vs memory_allocated() shows the "
            "cache); what remains is held by live tensors.";
      }
      break;
    case Family::CuPy:
      f.id = "cupy_pool";
      f.name = "CuPy memory pool";
      f.advice =
          "CuPy's memory pool keeps the memory of freed arrays for reuse: release it with "
          "cupy.get_default_memory_pool().free_all_blocks() (and get_default_pinned_memory_pool() for pinned "
          "memory); what remains is held by live arrays.";
      break;
    case Family::Jax:
      f.id = "jax_xla";
      f.name = "JAX/XLA BFC allocator";
      f.advice =
          "JAX preallocates most of the GPU's memory at start-up (XLA's BFC allocator) and keeps it for the whole "
          "run: that block is not a leak. Run with XLA_PYTHON_CLIENT_PREALLOCATE=false (or "
          "XLA_PYTHON_CLIENT_ALLOCATOR=platform to allocate and free on demand) to see what arrays hold.";
      break;
    case Family::None:
      break;
  }
  return f;
}

}  // namespace

std::vector<AllocatorFinding> name_allocators(const std::vector<LeakGroup>& leaks) {
  std::map<std::string, AllocatorFinding> by_id;
  for (const LeakGroup& group : leaks) {
    Family family = Family::None;
    for (const Frame& frame : group.stack.frames) {
      family = family_of(frame);
      if (family != Family::None) break;
    }
    if (family == Family::None) continue;
    AllocatorFinding described = describe(group, family);
    AllocatorFinding& finding = by_id.try_emplace(described.id, described).first->second;
    finding.leaked_bytes += group.bytes;
    finding.leaked_allocations += group.count;
    ++finding.leak_groups;
  }
  std::vector<AllocatorFinding> findings;
  for (auto& [id, finding] : by_id) findings.push_back(std::move(finding));
  std::stable_sort(findings.begin(), findings.end(),
                   [](const auto& a, const auto& b) { return a.leaked_bytes > b.leaked_bytes; });
  return findings;
}

}  // namespace gmt::analysis
