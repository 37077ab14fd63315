// An app of the driver API, run against the fake driver (a TEST FIXTURE: fake_cuda.cpp) by test_driver_backends.py:
// one call of every memory function the driver-level backends record, in a fixed order, with deterministic
// addresses, so that the two backends' traces can be compared row for row. Each call is made from a function of
// its own (never inlined), so that the test can check the stack each event starts at.
#undef CUDA_API_PER_THREAD_DEFAULT_STREAM
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#undef cuIpcOpenMemHandle
extern "C" {
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags);
}

namespace {

#define NOINLINE __attribute__((noinline))

int g_failures = 0;

void expect(CUresult got, CUresult want, const char* what) {
  if (got == want) return;
  std::fprintf(stderr, "driver_app: %s returned %d, expected %d\n", what, static_cast<int>(got),
               static_cast<int>(want));
  ++g_failures;
}

const auto kStream = reinterpret_cast<CUstream>(0x77);

// The pool sampler takes at most one sample per 10 ms and thread: a pause before each stream-ordered call makes
// every one of them sampled, so that the pool_usage rows do not depend on timing.
void pause_for_pool_sampler() { usleep(20000); }

NOINLINE CUdeviceptr device_alloc(size_t bytes) {
  CUdeviceptr p = 0;
  expect(cuMemAlloc_v2(&p, bytes), CUDA_SUCCESS, "cuMemAlloc_v2");
  return p;
}

NOINLINE CUdeviceptr pitched_alloc() {
  CUdeviceptr p = 0;
  size_t pitch = 0;
  expect(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 4), CUDA_SUCCESS, "cuMemAllocPitch_v2");
  return p;
}

NOINLINE void failed_managed_alloc() {
  CUdeviceptr p = 0;
  expect(cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged");
}

NOINLINE void managed_alloc() {
  CUdeviceptr p = 0;
  expect(cuMemAllocManaged(&p, 65536, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS, "cuMemAllocManaged");
}

NOINLINE void out_of_memory() {
  CUdeviceptr p = 0;
  expect(cuMemAlloc_v2(&p, size_t{1} << 50), CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2 (too large)");
}

NOINLINE void* pinned_alloc(size_t bytes) {
  void* p = nullptr;
  expect(cuMemAllocHost_v2(&p, bytes), CUDA_SUCCESS, "cuMemAllocHost_v2");
  return p;
}

NOINLINE void* host_alloc(size_t bytes) {
  void* p = nullptr;
  expect(cuMemHostAlloc(&p, bytes, 0), CUDA_SUCCESS, "cuMemHostAlloc");
  return p;
}

NOINLINE CUdeviceptr alloc_on_second_device() {
  CUcontext first = nullptr, second = reinterpret_cast<CUcontext>(0x2000);
  cuCtxGetCurrent(&first);
  expect(cuCtxSetCurrent(second), CUDA_SUCCESS, "cuCtxSetCurrent");
  CUdeviceptr p = device_alloc(2 << 20);
  expect(cuCtxSetCurrent(first), CUDA_SUCCESS, "cuCtxSetCurrent");
  return p;
}

// As cudart gets its entry points: through cuGetProcAddress.
NOINLINE CUdeviceptr alloc_through_entry_point() {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status{};
  expect(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, &status), CUDA_SUCCESS, "cuGetProcAddress_v2");
  CUdeviceptr p = 0;
  if (fn) expect(reinterpret_cast<decltype(&cuMemAlloc_v2)>(fn)(&p, 3 << 20), CUDA_SUCCESS, "cuMemAlloc (entry point)");
  return p;
}

NOINLINE CUdeviceptr async_alloc(size_t bytes, bool per_thread) {
  pause_for_pool_sampler();
  CUdeviceptr p = 0;
  expect(per_thread ? cuMemAllocAsync_ptsz(&p, bytes, kStream) : cuMemAllocAsync(&p, bytes, kStream), CUDA_SUCCESS,
         "cuMemAllocAsync");
  return p;
}

NOINLINE CUmemoryPool pool_create() {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool = nullptr;
  expect(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS, "cuMemPoolCreate");
  return pool;
}

NOINLINE CUdeviceptr pool_alloc(CUmemoryPool pool, size_t bytes, bool per_thread) {
  pause_for_pool_sampler();
  CUdeviceptr p = 0;
  expect(per_thread ? cuMemAllocFromPoolAsync_ptsz(&p, bytes, pool, kStream)
                    : cuMemAllocFromPoolAsync(&p, bytes, pool, kStream),
         CUDA_SUCCESS, "cuMemAllocFromPoolAsync");
  return p;
}

NOINLINE void async_free(CUdeviceptr p, bool per_thread) {
  expect(per_thread ? cuMemFreeAsync_ptsz(p, kStream) : cuMemFreeAsync(p, kStream), CUDA_SUCCESS, "cuMemFreeAsync");
}

NOINLINE void virtual_memory() {
  CUdeviceptr range = 0;
  expect(cuMemAddressReserve(&range, 8 << 20, 0, 0, 0), CUDA_SUCCESS, "cuMemAddressReserve");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle handle = 0;
  expect(cuMemCreate(&handle, 2 << 20, &prop, 0), CUDA_SUCCESS, "cuMemCreate");
  expect(cuMemMap(range, 2 << 20, 0, handle, 0), CUDA_SUCCESS, "cuMemMap");
  expect(cuMemUnmap(range, 2 << 20), CUDA_SUCCESS, "cuMemUnmap");
  expect(cuMemRelease(handle), CUDA_SUCCESS, "cuMemRelease");
  expect(cuMemMap(range, 2 << 20, 0, handle, 0), CUDA_ERROR_INVALID_VALUE, "cuMemMap (released handle)");
  expect(cuMemAddressFree(range, 8 << 20), CUDA_SUCCESS, "cuMemAddressFree");
}

NOINLINE void imported_memory() {
  CUipcMemHandle ipc{};
  CUdeviceptr opened = 0, opened_too = 0;
  expect(cuIpcOpenMemHandle_v2(&opened, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS,
         "cuIpcOpenMemHandle_v2");
  expect(cuIpcOpenMemHandle(&opened_too, ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS, "cuIpcOpenMemHandle");
  expect(cuIpcCloseMemHandle(opened), CUDA_SUCCESS, "cuIpcCloseMemHandle");
  CUmemGenericAllocationHandle handle = 0;
  expect(cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(intptr_t{5}),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
         CUDA_SUCCESS, "cuMemImportFromShareableHandle");
  CUdeviceptr range = 0;
  expect(cuMemAddressReserve(&range, 2 << 20, 0, 0, 0), CUDA_SUCCESS, "cuMemAddressReserve");
  expect(cuMemMap(range, 2 << 20, 0, handle, 0), CUDA_SUCCESS, "cuMemMap (imported)");
  expect(cuMemUnmap(range, 2 << 20), CUDA_SUCCESS, "cuMemUnmap (imported)");
  expect(cuMemRelease(handle), CUDA_SUCCESS, "cuMemRelease (imported)");
  expect(cuMemAddressFree(range, 2 << 20), CUDA_SUCCESS, "cuMemAddressFree");
}

NOINLINE void device_free(CUdeviceptr p) { expect(cuMemFree_v2(p), CUDA_SUCCESS, "cuMemFree_v2"); }
NOINLINE void pinned_free(void* p) { expect(cuMemFreeHost(p), CUDA_SUCCESS, "cuMemFreeHost"); }

}  // namespace

int main() {
  expect(cuInit(0), CUDA_SUCCESS, "cuInit");
  CUdeviceptr first = device_alloc(1 << 20);
  pitched_alloc();  // leaked
  failed_managed_alloc();
  managed_alloc();  // leaked
  out_of_memory();
  void* pinned = pinned_alloc(4096);
  host_alloc(8192);          // leaked
  alloc_on_second_device();  // leaked
  CUdeviceptr through_entry_point = alloc_through_entry_point();

  CUdeviceptr a = async_alloc(256 << 10, false);
  CUdeviceptr b = async_alloc(512 << 10, true);
  CUmemoryPool pool = pool_create();
  CUdeviceptr c = pool_alloc(pool, 1 << 20, false);
  CUdeviceptr d = pool_alloc(pool, 1 << 20, true);
  async_free(a, false);
  async_free(b, true);
  async_free(c, false);
  async_free(d, true);
  expect(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS, "cuMemPoolTrimTo");
  expect(cuMemPoolDestroy(pool), CUDA_SUCCESS, "cuMemPoolDestroy");

  virtual_memory();
  imported_memory();

  device_free(first);
  device_free(through_entry_point);
  device_free(0);  // a no-op, not a free
  pinned_free(pinned);
  if (g_failures != 0) return 1;
  std::puts("driver_app: done");
  return 0;
}
