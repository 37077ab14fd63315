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
    case EventKind::PoolCreate: return "pool_create";
    case EventKind::PoolDestroy: return "pool_destroy";
    case EventKind::PoolTrim: return "pool_trim";
    case EventKind::VmmReserve: return "vmm_reserve";
    case EventKind::VmmAddressFree: return "vmm_address_free";
    case EventKind::VmmCreate: return "vmm_create";
    case EventKind::VmmRelease: return "vmm_release";
    case EventKind::VmmMap: return "vmm_map";
    case EventKind::VmmUnmap: return "vmm_unmap";
    case EventKind::PoolUsage: return "pool_usage";
    case EventKind::RangeBegin: return "range_begin";
    case EventKind::RangeEnd: return "range_end";
    case EventKind::Mark: return "mark";
    case EventKind::VmmImport: return "vmm_import";
    case EventKind::AllocatorSample: return "allocator_sample";
    case EventKind::SegmentAlloc: return "segment_alloc";
    case EventKind::SegmentFree: return "segment_free";
    case EventKind::GraphAllocNode: return "graph_alloc_node";
    case EventKind::AutogradBegin: return "autograd_begin";
    case EventKind::AutogradEnd: return "autograd_end";
    case EventKind::FreeRequested: return "free_requested";
    case EventKind::AllocatorCall: return "allocator_call";
  }
  return "unknown";
}

std::string_view to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::None: return "none";
    case MemoryKind::Device: return "device";
    case MemoryKind::Managed: return "managed";
    case MemoryKind::HostPinned: return "host_pinned";
    case MemoryKind::VmmPhysical: return "vmm_physical";
    case MemoryKind::IpcImported: return "ipc_imported";
    case MemoryKind::TensorBlock: return "tensor_block";
    case MemoryKind::HeapBlock: return "heap_block";
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
    case Api::cuMemAlloc: return "cuMemAlloc";
    case Api::cuMemAllocPitch: return "cuMemAllocPitch";
    case Api::cuMemAllocManaged: return "cuMemAllocManaged";
    case Api::cuMemAllocHost: return "cuMemAllocHost";
    case Api::cuMemHostAlloc: return "cuMemHostAlloc";
    case Api::cuMemFree: return "cuMemFree";
    case Api::cuMemFreeHost: return "cuMemFreeHost";
    case Api::cuMemAllocAsync: return "cuMemAllocAsync";
    case Api::cuMemAllocFromPoolAsync: return "cuMemAllocFromPoolAsync";
    case Api::cuMemFreeAsync: return "cuMemFreeAsync";
    case Api::cuMemPoolCreate: return "cuMemPoolCreate";
    case Api::cuMemPoolDestroy: return "cuMemPoolDestroy";
    case Api::cuMemPoolTrimTo: return "cuMemPoolTrimTo";
    case Api::cuMemCreate: return "cuMemCreate";
    case Api::cuMemRelease: return "cuMemRelease";
    case Api::cuMemMap: return "cuMemMap";
    case Api::cuMemUnmap: return "cuMemUnmap";
    case Api::cuMemAddressReserve: return "cuMemAddressReserve";
    case Api::cuMemAddressFree: return "cuMemAddressFree";
    case Api::cudaMemPoolCreate: return "cudaMemPoolCreate";
    case Api::cudaMemPoolDestroy: return "cudaMemPoolDestroy";
    case Api::cudaMemPoolTrimTo: return "cudaMemPoolTrimTo";
    case Api::cudaIpcOpenMemHandle: return "cudaIpcOpenMemHandle";
    case Api::cudaIpcCloseMemHandle: return "cudaIpcCloseMemHandle";
    case Api::cuIpcOpenMemHandle_v2: return "cuIpcOpenMemHandle";
    case Api::cuIpcCloseMemHandle: return "cuIpcCloseMemHandle";
    case Api::cuMemImportFromShareableHandle: return "cuMemImportFromShareableHandle";
    case Api::torchBlockAlloc: return "torch_block_alloc";
    case Api::torchBlockFree: return "torch_block_free";
    case Api::torchSegmentAlloc: return "torch_segment_alloc";
    case Api::torchSegmentFree: return "torch_segment_free";
    case Api::torchSegmentMap: return "torch_segment_map";
    case Api::torchSegmentUnmap: return "torch_segment_unmap";
    case Api::graphMemAlloc: return "graph_mem_alloc";
    case Api::graphMemFree: return "graph_mem_free";
    case Api::cuGraphAddMemAllocNode: return "cuGraphAddMemAllocNode";
    case Api::nvtxMemHeapRegister: return "nvtxMemHeapRegister";
    case Api::nvtxMemHeapUnregister: return "nvtxMemHeapUnregister";
    case Api::nvtxMemRegionsRegister: return "nvtxMemRegionsRegister";
    case Api::nvtxMemRegionsUnregister: return "nvtxMemRegionsUnregister";
    case Api::nvtxMemHeapReset: return "nvtxMemHeapReset";
    case Api::torchBackward: return "torch_backward";
    case Api::torchAutogradGrad: return "torch_autograd_grad";
    case Api::cupyChunkAlloc: return "cupy_chunk_alloc";
    case Api::cupyChunkFree: return "cupy_chunk_free";
    case Api::cupyBlockAlloc: return "cupy_block_alloc";
    case Api::cupyBlockFree: return "cupy_block_free";
    case Api::torchBlockFreeRequested: return "torch_block_free_requested";
    case Api::torchEmptyCache: return "torch_empty_cache";
    case Api::torchSetAllocatorSettings: return "torch_set_allocator_settings";
    case Api::torchSetMemoryFraction: return "torch_set_memory_fraction";
  }
  return "unknown";
}

std::string_view to_string(Source source) {
  switch (source) {
    case Source::RuntimeHook: return "runtime_hook";
    case Source::Cupti: return "cupti";
    case Source::DriverHook: return "driver_hook";
    case Source::TorchAllocator: return "torch_allocator";
    case Source::NvtxMemory: return "nvtx_memory";
    case Source::CupyAllocator: return "cupy_allocator";
  }
  return "unknown";
}

std::string_view to_string(FrameworkAllocator allocator) {
  switch (allocator) {
    case FrameworkAllocator::TorchCaching: return "pytorch_caching";
    case FrameworkAllocator::TorchExpandable: return "pytorch_expandable_segments";
    case FrameworkAllocator::TorchMallocAsync: return "pytorch_cuda_malloc_async";
    case FrameworkAllocator::CupyPool: return "cupy_pool";
    case FrameworkAllocator::JaxXla: return "jax_xla";
  }
  return "unknown";
}

std::string_view to_string(SampleTrigger trigger) {
  switch (trigger) {
    case SampleTrigger::Cadence: return "cadence";
    case SampleTrigger::RangeEnd: return "range_end";
    case SampleTrigger::Oom: return "oom";
    case SampleTrigger::Exit: return "exit";
  }
  return "unknown";
}

}  // namespace gmt::schema
