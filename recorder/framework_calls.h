// A framework's calls and heaps beyond PyTorch's caching allocator (recorder/framework_blocks.h has that one), as
// events; exported from the preload library (interpose/exports.map) for the in-process Python package, which calls
// them through ctypes (the GIL released): they only append to the recorder's buffers.
//   - autograd's backward calls (python/gpumemtrace_inprocess/autograd_calls.py): begun and ended on the calling
//     thread, the begin with that thread's stack (its Python frames name the backward() line), so that the tensors
//     autograd's worker threads allocate meanwhile can be linked to it after the run (schema v9: AutogradBegin,
//     AutogradEnd).
//   - CuPy's memory pool (python/gpumemtrace_inprocess/cupy_tracker.py): its chunks (the memory it takes from
//     CUDA) and its blocks (an array's memory inside a chunk), as a heap (schema v9: source CupyAllocator).
#pragma once

#include <stdint.h>

extern "C" {

// `begin` 1 at the call's start (with the caller's stack), 0 at its end; `api` 1 = torch.autograd.backward (and
// Tensor.backward), 2 = torch.autograd.grad; `call` a number that pairs the two.
void gmt_autograd_call(int begin, int api, uint64_t call);

// CuPy's pool: `action` 1 = a block handed to an array (with the stack), 2 = the block given back, 3 = a chunk taken
// from CUDA, 4 = a chunk given back. `device`, `address`, `size` as the pool says (size 0 for frees).
void gmt_cupy_pool_action(int action, int device, uint64_t address, uint64_t size);
}
