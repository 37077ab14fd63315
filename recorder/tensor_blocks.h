// PyTorch's tensor blocks (the block-level mode, `run --torch-blocks`): the C interface through which the in-process
// Python package (python/gpumemtrace_inprocess/torch_blocks.py, via ctypes) hands over the entries it drained
// from PyTorch's memory history. One call records a batch; strings and frames are shared by the batch's blocks.
// Exported from the preload library (interpose/exports.map); the layouts below are the ctypes side's too.
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

// One tensor block allocated or freed by PyTorch's caching allocator.
struct gmt_tensor_block {
  uint64_t time_ns;      // CLOCK_MONOTONIC (the caller converts PyTorch's Unix-epoch microseconds)
  uint64_t address;
  uint64_t size;         // bytes of the block (alloc); ignored for a free
  uint64_t stream;       // cudaStream_t as an integer
  int32_t device;        // CUDA device ordinal
  int32_t is_free;       // 0: the block was handed to a tensor; 1: it went back to the allocator
  uint32_t first_frame;  // index of its innermost Python frame in the batch's frames
  uint32_t frame_count;  // its Python frames, innermost first (0: none, e.g. allocated by autograd's thread)
};

// One Python frame of the batch: indices into the batch's strings, and the line (0: unknown).
struct gmt_tensor_block_frame {
  uint32_t file;
  uint32_t function;
  int32_t line;
};

// Records `count` blocks (in time order) as Alloc/Free events of memory kind TensorBlock, source TorchAllocator,
// with their Python frames interned into the trace's strings/python_frames and their stacks into stacks, as the
// native path does; `thread_id` is the thread the events name (PyTorch's history does not say which thread
// allocated). Sets meta tensor_blocks = "1" and tensor_blocks_overruns = `overruns` (drains that found entries
// overwritten before they were drained). count 0 only updates the meta keys. Returns the blocks recorded, or -1
// for a bad argument (an index out of range). Never touches SQLite on the caller's thread.
int gmt_record_tensor_blocks(const gmt_tensor_block* blocks, size_t count, const gmt_tensor_block_frame* frames,
                             size_t frame_count, const char* const* strings, size_t string_count,
                             uint32_t thread_id, uint64_t overruns);
}
