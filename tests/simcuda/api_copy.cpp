// Copies, fills and pointer queries. Simulated device memory is ordinary process memory, so every
// copy is a memmove and every fill a memset, done synchronously even for the *Async variants
// (which is a legal schedule of any stream program). What this file adds is the checking a real
// GPU would do: the device side of a copy must be device memory, and must lie inside one live
// allocation, so use-after-free and overruns come back as cudaErrorInvalidValue.
#include <cstring>

#include "sim_runtime.h"

using gmt::sim::Classified;
using gmt::sim::finish;
using gmt::sim::Runtime;
using gmt::sim::Where;

namespace {

// Checks one side of a copy or fill covering `bytes` bytes at `p`.
cudaError_t check_side(const void* p, std::size_t bytes, bool must_be_device) {
  const Classified c = Runtime::get().classify(p, bytes);
  if (c.where == Where::BadDeviceRange) return cudaErrorInvalidValue;
  // Page-locked host memory is device-accessible under unified addressing; pageable memory is not.
  if (must_be_device && c.where == Where::PageableHost) return cudaErrorInvalidValue;
  return cudaSuccess;
}

cudaError_t check_kind(cudaMemcpyKind kind, bool* dst_device, bool* src_device) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  // cudaMemcpyDefault infers both sides from the pointers, so neither side is forced.
  *dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  *src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  return cudaSuccess;
}

cudaError_t check_stream(cudaStream_t stream) {
  int device = 0;
  return Runtime::get().stream_device(stream, &device);
}

cudaError_t copy(void* dst, const void* src, std::size_t count, cudaMemcpyKind kind) {
  bool dst_device = false;
  bool src_device = false;
  if (const cudaError_t e = check_kind(kind, &dst_device, &src_device); e != cudaSuccess) return e;
  if (count == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_side(dst, count, dst_device); e != cudaSuccess) return e;
  if (const cudaError_t e = check_side(src, count, src_device); e != cudaSuccess) return e;
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t copy_peer(void* dst, int dst_device, const void* src, int src_device, std::size_t count) {
  Runtime& rt = Runtime::get();
  if (const cudaError_t e = rt.check_device(dst_device); e != cudaSuccess) return e;
  if (const cudaError_t e = rt.check_device(src_device); e != cudaSuccess) return e;
  return copy(dst, src, count, cudaMemcpyDeviceToDevice);
}

cudaError_t fill(void* dst, int value, std::size_t count) {
  if (count == 0) return cudaSuccess;
  if (dst == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_side(dst, count, true); e != cudaSuccess) return e;
  std::memset(dst, value, count);
  return cudaSuccess;
}

// Bytes spanned by `height` rows of `width` bytes each, `pitch` apart.
std::size_t span_2d(std::size_t pitch, std::size_t width, std::size_t height) {
  return height == 0 ? 0 : (height - 1) * pitch + width;
}

cudaError_t copy_2d(void* dst, std::size_t dpitch, const void* src, std::size_t spitch, std::size_t width,
                    std::size_t height, cudaMemcpyKind kind) {
  bool dst_device = false;
  bool src_device = false;
  if (const cudaError_t e = check_kind(kind, &dst_device, &src_device); e != cudaSuccess) return e;
  if (width > dpitch || width > spitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_side(dst, span_2d(dpitch, width, height), dst_device); e != cudaSuccess) {
    return e;
  }
  if (const cudaError_t e = check_side(src, span_2d(spitch, width, height), src_device); e != cudaSuccess) {
    return e;
  }
  for (std::size_t row = 0; row < height; ++row) {
    std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
  }
  return cudaSuccess;
}

cudaError_t fill_2d(void* dst, std::size_t pitch, int value, std::size_t width, std::size_t height) {
  if (width > pitch) return cudaErrorInvalidPitchValue;
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = check_side(dst, span_2d(pitch, width, height), true); e != cudaSuccess) return e;
  for (std::size_t row = 0; row < height; ++row) std::memset(static_cast<char*>(dst) + row * pitch, value, width);
  return cudaSuccess;
}

cudaError_t fill_3d(cudaPitchedPtr target, int value, cudaExtent extent) {
  if (extent.depth == 0) return cudaSuccess;
  // One slice is ysize rows of `pitch` bytes; fill each slice as a 2D region.
  const std::size_t slice = target.pitch * target.ysize;
  for (std::size_t z = 0; z < extent.depth; ++z) {
    const cudaError_t e =
        fill_2d(static_cast<char*>(target.ptr) + z * slice, target.pitch, value, extent.width, extent.height);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return finish(copy(dst, src, count, kind));
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(copy(dst, src, count, kind));
}

cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                         cudaMemcpyKind kind) {
  return finish(copy_2d(dst, dpitch, src, spitch, width, height, kind));
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(copy_2d(dst, dpitch, src, spitch, width, height, kind));
}

cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count) {
  return finish(copy_peer(dst, dstDevice, src, srcDevice, count));
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                                cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(copy_peer(dst, dstDevice, src, srcDevice, count));
}

cudaError_t cudaMemset(void* devPtr, int value, size_t count) { return finish(fill(devPtr, value, count)); }

cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(fill(devPtr, value, count));
}

cudaError_t cudaMemset2D(void* devPtr, size_t pitch, int value, size_t width, size_t height) {
  return finish(fill_2d(devPtr, pitch, value, width, height));
}

cudaError_t cudaMemset2DAsync(void* devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(fill_2d(devPtr, pitch, value, width, height));
}

cudaError_t cudaMemset3D(cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent) {
  return finish(fill_3d(pitchedDevPtr, value, extent));
}

cudaError_t cudaMemset3DAsync(cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(fill_3d(pitchedDevPtr, value, extent));
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return finish(cudaErrorInvalidValue);
  const Classified c = Runtime::get().classify(ptr, 0);
  *attributes = cudaPointerAttributes{};
  void* address = const_cast<void*>(ptr);
  switch (c.where) {
    case Where::DeviceAllocation:
      attributes->type = c.kind == gmt::sim::MemoryKind::Managed ? cudaMemoryTypeManaged : cudaMemoryTypeDevice;
      attributes->device = c.device;
      attributes->devicePointer = address;
      // Managed memory is host-accessible at the same address; so is all simulated memory, but a
      // profiler should see what a real GPU would report.
      attributes->hostPointer = c.kind == gmt::sim::MemoryKind::Managed ? address : nullptr;
      break;
    case Where::Symbol:
      attributes->type = cudaMemoryTypeDevice;
      attributes->device = c.device;
      attributes->devicePointer = address;
      break;
    case Where::PinnedHost:
      attributes->type = cudaMemoryTypeHost;
      attributes->device = c.device;
      attributes->devicePointer = address;
      attributes->hostPointer = address;
      break;
    case Where::BadDeviceRange:  // freed device memory reads as unknown, like any other address
    case Where::PageableHost:
      attributes->type = cudaMemoryTypeUnregistered;
      attributes->device = -2;  // what the real runtime reports for memory it does not know
      break;
  }
  return cudaSuccess;
}

cudaError_t cudaMemPrefetchAsync(const void* devPtr, size_t count, cudaMemLocation /*location*/, unsigned int /*flags*/,
                                 cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  // Nothing migrates: all simulated memory is equally close to everyone.
  return finish(check_side(devPtr, count, true));
}

cudaError_t cudaMemAdvise(const void* devPtr, size_t count, cudaMemoryAdvise /*advice*/, cudaMemLocation /*location*/) {
  return finish(check_side(devPtr, count, true));
}

}  // extern "C"

// Per-thread-default-stream twins (see GMT_SIM_TWIN).
GMT_SIM_TWIN(cudaMemcpy_ptds, cudaMemcpy, (void* dst, const void* src, size_t count, cudaMemcpyKind kind));
GMT_SIM_TWIN(cudaMemcpy2D_ptds, cudaMemcpy2D,
             (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
              cudaMemcpyKind kind));
GMT_SIM_TWIN(cudaMemset_ptds, cudaMemset, (void* devPtr, int value, size_t count));
GMT_SIM_TWIN(cudaMemset2D_ptds, cudaMemset2D, (void* devPtr, size_t pitch, int value, size_t width, size_t height));
GMT_SIM_TWIN(cudaMemset3D_ptds, cudaMemset3D, (cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent));
GMT_SIM_TWIN(cudaMemcpyAsync_ptsz, cudaMemcpyAsync,
             (void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream));
GMT_SIM_TWIN(cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync,
             (void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
              cudaMemcpyKind kind, cudaStream_t stream));
GMT_SIM_TWIN(cudaMemsetAsync_ptsz, cudaMemsetAsync, (void* devPtr, int value, size_t count, cudaStream_t stream));
GMT_SIM_TWIN(cudaMemset2DAsync_ptsz, cudaMemset2DAsync,
             (void* devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream));
GMT_SIM_TWIN(cudaMemset3DAsync_ptsz, cudaMemset3DAsync,
             (cudaPitchedPtr pitchedDevPtr, int value, cudaExtent extent, cudaStream_t stream));
GMT_SIM_TWIN(cudaMemPrefetchAsync_ptsz, cudaMemPrefetchAsync,
             (const void* devPtr, size_t count, cudaMemLocation location, unsigned int flags, cudaStream_t stream));
