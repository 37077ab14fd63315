#include "trace_schema.h"

namespace gmt::schema {

std::string_view to_string(EventKind kind) {
  switch (kind) {
    case EventKind::Alloc: return "alloc";
    case EventKind::Free: return "free";
    case EventKind::AllocFailed: return "alloc_failed";
    case EventKind::StreamCreate: return "stream_create";
    case EventKind::StreamDestroy: return "stream_destroy";
    case EventKind::Synchronize: return "synchronize";
  }
  return "unknown";
}

std::string_view to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::None: return "none";
    case MemoryKind::Device: return "device";
    case MemoryKind::Managed: return "managed";
    case MemoryKind::HostPinned: return "host_pinned";
  }
  return "unknown";
}

std::string_view to_string(Api api) {
  switch (api) {
    case Api::Unknown: return "unknown";
    case Api::cudaMalloc: return "cudaMalloc";
    case Api::cudaMallocManaged: return "cudaMallocManaged";
    case Api::cudaMallocHost: return "cudaMallocHost";
    case Api::cudaHostAlloc: return "cudaHostAlloc";
    case Api::cudaMallocPitch: return "cudaMallocPitch";
    case Api::cudaMalloc3D: return "cudaMalloc3D";
    case Api::cudaMallocAsync: return "cudaMallocAsync";
    case Api::cudaMallocFromPoolAsync: return "cudaMallocFromPoolAsync";
    case Api::cudaFree: return "cudaFree";
    case Api::cudaFreeHost: return "cudaFreeHost";
    case Api::cudaFreeAsync: return "cudaFreeAsync";
    case Api::cudaStreamCreate: return "cudaStreamCreate";
    case Api::cudaStreamCreateWithFlags: return "cudaStreamCreateWithFlags";
    case Api::cudaStreamCreateWithPriority: return "cudaStreamCreateWithPriority";
    case Api::cudaStreamDestroy: return "cudaStreamDestroy";
    case Api::cudaStreamSynchronize: return "cudaStreamSynchronize";
    case Api::cudaDeviceSynchronize: return "cudaDeviceSynchronize";
  }
  return "unknown";
}

std::string_view to_string(Source source) {
  switch (source) {
    case Source::RuntimeHook: return "runtime_hook";
  }
  return "unknown";
}

}  // namespace gmt::schema
