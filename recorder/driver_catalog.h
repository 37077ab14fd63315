// The driver catalog: every CUDA driver function that the driver-level backends record (recorder/backend.h),
// listed once for both of them:
//   - cupti/ enables CUPTI's driver-API callback of each (cupti_callbacks.h) and hands each call to its row;
//   - interpose/ wraps each function the driver exports (driver_hook_table.h) and hands each call to its row.
// Each function's row, in recorder/driver_calls.h, says on which side of the call its events are recorded, which
// memory kind they are, and how the call's parameters become them: written once, for both backends.
//
// GMT_DRIVER_CATALOG(X, X_CUPTI_ONLY) lists, in the order CUPTI's callbacks are enabled (and disabled in reverse):
//   X(function, api): a function the driver exports, by the exact name libcuda exports (cuda.h #defines many plain
//       names to versioned ones: cuMemAlloc -> cuMemAlloc_v2), and the schema::Api its events carry (a _ptsz twin
//       records as the plain call: to the user they are the same call);
//   X_CUPTI_ONLY(function, api, parameters): a callback id of CUPTI with no exported function behind it, and the
//       parameter struct its callbacks carry.
// Both of the driver's IPC-open entry points are Api::cuIpcOpenMemHandle_v2 (the schema spells it so because cuda.h
// #defines cuIpcOpenMemHandle as cuIpcOpenMemHandle_v2). Users of the list paste `function` (## or #), never
// expand it, so that cuda.h's #defines cannot rename it.
//
// No includes: driver_hook_table.h uses the list where cuda.h is not included.
#pragma once

#define GMT_DRIVER_CATALOG(X, X_CUPTI_ONLY)                                                                        \
  /* allocations and frees */                                                                                      \
  X(cuMemAlloc_v2, cuMemAlloc)                                                                                     \
  X(cuMemAllocPitch_v2, cuMemAllocPitch)                                                                           \
  X(cuMemAllocManaged, cuMemAllocManaged)                                                                          \
  X(cuMemAllocHost_v2, cuMemAllocHost)                                                                             \
  X(cuMemHostAlloc, cuMemHostAlloc)                                                                                \
  /* The driver has no cuMemHostAlloc_v2 symbol, but CUPTI 13.0 has an id for it (271): */                         \
  /* enabled too, with cuMemHostAlloc's parameters, so pinned allocations count whichever id the driver raises. */ \
  X_CUPTI_ONLY(cuMemHostAlloc_v2, cuMemHostAlloc, cuMemHostAlloc_params)                                           \
  X(cuMemFree_v2, cuMemFree)                                                                                       \
  X(cuMemFreeHost, cuMemFreeHost)                                                                                  \
  /* stream-ordered allocations and pools */                                                                       \
  X(cuMemAllocAsync, cuMemAllocAsync)                                                                              \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync)                                                                         \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync)                                                              \
  X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync)                                                         \
  X(cuMemFreeAsync, cuMemFreeAsync)                                                                                \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync)                                                                           \
  X(cuMemPoolCreate, cuMemPoolCreate)                                                                              \
  X(cuMemPoolDestroy, cuMemPoolDestroy)                                                                            \
  X(cuMemPoolTrimTo, cuMemPoolTrimTo)                                                                              \
  /* virtual memory management (PyTorch's expandable segments) */                                                  \
  X(cuMemCreate, cuMemCreate)                                                                                      \
  X(cuMemRelease, cuMemRelease)                                                                                    \
  X(cuMemMap, cuMemMap)                                                                                            \
  X(cuMemUnmap, cuMemUnmap)                                                                                        \
  X(cuMemAddressReserve, cuMemAddressReserve)                                                                      \
  X(cuMemAddressFree, cuMemAddressFree)                                                                            \
  /* memory imported from other processes (IPC handles, shareable VMM handles) */                                  \
  X(cuIpcOpenMemHandle, cuIpcOpenMemHandle_v2)                                                                     \
  X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle_v2)                                                                  \
  X(cuIpcCloseMemHandle, cuIpcCloseMemHandle)                                                                      \
  X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle)                                                \
  /* stream capture: counted, so that an allocation on a capturing stream is known as a graph node */              \
  X_CUPTI_ONLY(cuStreamBeginCapture, Unknown, cuStreamBeginCapture_params)                                         \
  X_CUPTI_ONLY(cuStreamBeginCapture_ptsz, Unknown, cuStreamBeginCapture_ptsz_params)                               \
  X(cuStreamBeginCapture_v2, Unknown)                                                                              \
  X(cuStreamBeginCapture_v2_ptsz, Unknown)                                                                         \
  X(cuStreamBeginCaptureToGraph, Unknown)                                                                          \
  X(cuStreamBeginCaptureToGraph_ptsz, Unknown)                                                                     \
  X(cuStreamEndCapture, Unknown)                                                                                   \
  X(cuStreamEndCapture_ptsz, Unknown)                                                                              \
  /* CUDA graphs' memory nodes: allocated and freed at each launch (recorder/graph_memory.h) */                    \
  X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode)                                                                \
  X(cuGraphInstantiateWithFlags, Unknown)                                                                          \
  X(cuGraphInstantiateWithParams, Unknown)                                                                         \
  X(cuGraphInstantiateWithParams_ptsz, Unknown)                                                                    \
  X(cuGraphLaunch, graphMemAlloc)                                                                                  \
  X(cuGraphLaunch_ptsz, graphMemAlloc)                                                                             \
  X(cuGraphExecDestroy, Unknown)

// For a use of the list that leaves one kind of entry out.
#define GMT_DRIVER_CATALOG_SKIP(...)
