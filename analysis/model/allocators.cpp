#include "analysis/model/allocators.h"

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
      f.advice = "CuPy's memory pool keeps the memory of freed arrays for reuse: release it with "
                 "cupy.get_default_memory_pool().free_all_blocks() (and get_default_pinned_memory_pool() for pinned "
                 "memory); what remains is held by live arrays.";
      break;
    case Family::Jax:
      // XLA's BFC arena is cached at exit, never here (is_xla_arena): what is left are XLA's buffers allocated
      // one by one (XLA_PYTHON_CLIENT_ALLOCATOR=platform or cuda_async), held by live arrays at exit.
      f.id = "jax_xla";
      f.name = "JAX/XLA allocator";
      f.advice =
          "XLA allocated these outside its preallocated arena (XLA_PYTHON_CLIENT_ALLOCATOR=platform or cuda_async): "
          "they are buffers that live jax.Arrays (or XLA's own executables) still held at exit. With the default "
          "arena (XLA_PYTHON_CLIENT_PREALLOCATE) they would be hidden inside it.";
      break;
    case Family::None: break;
  }
  return f;
}

// The family of a stack: its innermost frame of a known allocator's.
Family family_of(const Stack& stack) {
  for (const Frame& frame : stack.frames) {
    Family family = family_of(frame);
    if (family != Family::None) return family;
  }
  return Family::None;
}

}  // namespace

std::vector<AllocatorFinding> name_allocators(const std::vector<LeakGroup>& leaks) {
  std::map<std::string, AllocatorFinding> by_id;
  for (const LeakGroup& group : leaks) {
    Family family = family_of(group.stack);
    // Tensors without a stack (`run --sample-block-stacks` took none for them) are PyTorch's all the same.
    const bool tensors_only = !group.memory_kinds.empty() &&
                              std::all_of(group.memory_kinds.begin(), group.memory_kinds.end(),
                                          [](schema::MemoryKind k) { return k == schema::MemoryKind::TensorBlock; });
    if (family == Family::None && group.stack.frames.empty() && tensors_only) family = Family::PyTorch;
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

bool is_xla_arena(const Stack& stack) {
  if (family_of(stack) != Family::Jax) return false;
  bool xla_module = false;  // a native frame of XLA's: not only JAX's Python code calling some other library
  bool named = false;
  for (const Frame& frame : stack.frames) {
    if (frame.python || family_of(frame) != Family::Jax) continue;
    xla_module = true;
    if (!frame.function) continue;
    if (frame.function->find("BFCAllocator") != std::string::npos) return true;
    named = true;
  }
  return xla_module && !named;
}

bool XlaArenaAtExit::take(int64_t stack_id, const Stack& stack, uint64_t size) {
  auto [it, added] = by_stack_.try_emplace(stack_id, false);
  if (added) it->second = is_xla_arena(stack);
  if (!it->second) return false;
  bytes_ += size;
  ++allocations_;
  return true;
}

void XlaArenaAtExit::add_to(Report& report) const {
  if (allocations_ == 0) return;
  HeapAtExit arena;
  arena.source = kXlaArenaSource;
  arena.allocator = "JAX/XLA's preallocated arena";
  arena.reserved_bytes = bytes_;
  arena.reserved_allocations = allocations_;
  arena.blocks_recorded = false;  // XLA hands out its buffers inside the arena unseen: no verdict on them
  arena.opaque = true;
  arena.note = "per-buffer truth needs XLA_PYTHON_CLIENT_ALLOCATOR=platform (each buffer its own CUDA allocation); "
               "XLA_PYTHON_CLIENT_PREALLOCATE=false only shrinks the arena to what was used";
  report.heaps.insert(report.heaps.begin(), std::move(arena));  // by source: kXlaArenaSource is the lowest
  report.totals.cached_at_exit_bytes += bytes_;
  report.totals.cached_at_exit_allocations += allocations_;
}

}  // namespace gmt::analysis
