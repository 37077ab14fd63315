/* A stand-in for the CUDA driver, libcuda.so.1, for CI machines without a GPU: just what the driver hooks and the
 * backend choice touch (interpose/hooks_reach.cpp, interpose/driver_hooks.cpp), so that a real process shows which
 * backend `auto` picks and why (tests/backend/test_backend_choice.py). Like the real driver, cuInit loads the
 * library CUDA_INJECTION64_PATH names and calls its InitializeInjection. Allocations come from a fake address
 * range; nothing else works. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;

static uintptr_t next_address = 0x7f3000000000u;

CUresult cuInit(unsigned int flags) {
  (void)flags;
  const char* injection = getenv("CUDA_INJECTION64_PATH");
  if (injection && *injection) {
    void* library = dlopen(injection, RTLD_NOW | RTLD_LOCAL);
    int (*initialize)(void) = library ? (int (*)(void))dlsym(library, "InitializeInjection") : NULL;
    if (initialize) initialize();
  }
  return 0;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = (CUcontext)0x1000;
  return 0;
}

CUresult cuCtxGetDevice(CUdevice* device) {
  *device = 0;
  return 0;
}

CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  *pointer = next_address;
  next_address += (bytes + 0xfff) & ~(uintptr_t)0xfff;
  return 0;
}

CUresult cuMemFree_v2(CUdeviceptr pointer) {
  (void)pointer;
  return 0;
}
