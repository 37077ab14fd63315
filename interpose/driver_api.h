// cuda.h as the driver hooks need it: every function of driver_hook_table.h declared under the exact name
// libcuda exports, with its real signature.
#pragma once

// Per-thread-stream builds rename cuMemAllocAsync & co. to their _ptsz twins; the wrappers define both.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>

// cuda.h maps the plain name to the versioned one; libcuda exports both, with different signatures, and we
// wrap both (pre-12.0 runtimes fetch the plain one).
#undef cuGetProcAddress
// Likewise: cuIpcOpenMemHandle (CUDA < 11.0 callers) and cuIpcOpenMemHandle_v2 are both exported and both
// wrapped; same signature.
#undef cuIpcOpenMemHandle

extern "C" {
// Declared by cuda.h only for the driver's own build (__CUDA_API_VERSION_INTERNAL); exported by every driver
// since 11.3.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
// Declared by cuda.h only under __CUDA_API_VERSION_INTERNAL (the plain name is the pre-11.0 one).
CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags);
// The per-thread-default-stream twins, exported by the driver, declared only in per-thread-stream builds.
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode* dependencies,
                                          const CUgraphEdgeData* dependencyData, size_t numDependencies,
                                          CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
}
