// Kernels and device variables, without a device.
//
// nvcc's generated host code registers every fat binary, kernel and __device__/__managed__
// variable from a static constructor, and turns `kernel<<<grid, block, shmem, stream>>>(args)`
// into __cudaPushCallConfiguration + a host stub that pops the configuration and calls
// __cudaLaunchKernel. We accept all of that, validate launches the way the driver would (unknown
// kernel, bad configuration, bad stream), and never run device code.
//
// __device__ variables live in their host shadow copies, which the program already owns, so
// cudaMemcpyToSymbol/FromSymbol and cudaGetSymbolAddress work on them.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "sim_runtime.h"

// Registration entry points are declared only in nvcc-internal headers (crt/host_runtime.h,
// crt/device_functions.h) that cannot be included from a host compiler; these declarations copy
// their signatures exactly.
extern "C" {
void** __cudaRegisterFatBinary(void* fatCubin);
void __cudaRegisterFatBinaryEnd(void** fatCubinHandle);
void __cudaUnregisterFatBinary(void** fatCubinHandle);
void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* deviceFun, const char* deviceName,
                            int thread_limit, uint3* tid, uint3* bid, dim3* bDim, dim3* gDim, int* wSize);
void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* deviceAddress, const char* deviceName, int ext,
                       size_t size, int constant, int global);
void __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress, char* deviceAddress,
                              const char* deviceName, int ext, size_t size, int constant, int global);
char __cudaInitModule(void** fatCubinHandle);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st* stream);
cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream);
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                               cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem,
                                    cudaStream_t stream);
}

using gmt::sim::finish;
using gmt::sim::Runtime;

namespace {

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  std::size_t shared_mem = 0;
  cudaStream_t stream = nullptr;
};

// <<<...>>> pushes, the kernel's host stub pops; per thread, as launches are.
thread_local std::vector<LaunchConfig> t_launch_configs;

// Limits of the simulated device (see api_device.cpp).
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr dim3 kMaxBlock{1024, 1024, 64};
constexpr dim3 kMaxGrid{2147483647u, 65535, 65535};
constexpr std::size_t kMaxSharedPerBlockOptin = 227 << 10;
constexpr std::size_t kSharedPerMultiprocessor = 228 << 10;
constexpr int kMaxThreadsPerMultiprocessor = 2048;
constexpr int kMaxBlocksPerMultiprocessor = 32;

bool is_registered(const void* host_fun) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  return rt.kernels.contains(host_fun);
}

bool fits(dim3 d, dim3 max) { return d.x >= 1 && d.y >= 1 && d.z >= 1 && d.x <= max.x && d.y <= max.y && d.z <= max.z; }

// Everything a launch is checked for; success means the kernel "ran" (it did nothing).
cudaError_t launch(const void* host_fun, dim3 grid, dim3 block, std::size_t shared_mem, cudaStream_t stream) {
  if (!is_registered(host_fun)) return cudaErrorInvalidDeviceFunction;
  int device = 0;
  if (const cudaError_t e = Runtime::get().stream_device(stream, &device); e != cudaSuccess) return e;
  if (!fits(grid, kMaxGrid) || !fits(block, kMaxBlock)) return cudaErrorInvalidConfiguration;
  if (static_cast<unsigned long long>(block.x) * block.y * block.z > kMaxThreadsPerBlock) {
    return cudaErrorInvalidConfiguration;
  }
  if (shared_mem > kMaxSharedPerBlockOptin) return cudaErrorInvalidValue;
  return cudaSuccess;
}

// Finds the registered symbol starting at `symbol` (its host shadow address).
cudaError_t find_symbol(const void* symbol, gmt::sim::Symbol* out) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.symbols.find(reinterpret_cast<std::uintptr_t>(symbol));
  if (it == rt.symbols.end()) return cudaErrorInvalidSymbol;
  *out = it->second;
  return cudaSuccess;
}

cudaError_t copy_symbol(const void* symbol, std::size_t count, std::size_t offset, cudaMemcpyKind kind, bool to_symbol,
                        void* other) {
  const bool kind_ok = to_symbol ? (kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice)
                                 : (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice);
  if (!kind_ok && kind != cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  gmt::sim::Symbol s;
  if (const cudaError_t e = find_symbol(symbol, &s); e != cudaSuccess) return e;
  if (offset > s.bytes || count > s.bytes - offset) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  if (other == nullptr) return cudaErrorInvalidValue;
  char* storage = s.storage + offset;
  if (to_symbol) {
    std::memmove(storage, other, count);
  } else {
    std::memmove(other, storage, count);
  }
  return cudaSuccess;
}

cudaError_t check_stream(cudaStream_t stream) {
  int device = 0;
  return Runtime::get().stream_device(stream, &device);
}

// Resident blocks per multiprocessor: threads, block slots and shared memory bound residency;
// registers are assumed not to.
cudaError_t occupancy(int* num_blocks, const void* func, int block_size, std::size_t dynamic_shared) {
  if (num_blocks == nullptr || block_size <= 0 || block_size > static_cast<int>(kMaxThreadsPerBlock)) {
    return cudaErrorInvalidValue;
  }
  if (!is_registered(func)) return cudaErrorInvalidDeviceFunction;
  const int warps_per_block = (block_size + 31) / 32;
  int blocks = std::min(kMaxBlocksPerMultiprocessor, kMaxThreadsPerMultiprocessor / (warps_per_block * 32));
  if (dynamic_shared > 0) {
    const std::size_t per_block = dynamic_shared + (1 << 10);  // plus the reserved 1 KiB
    blocks = std::min<int>(blocks, static_cast<int>(kSharedPerMultiprocessor / per_block));
  }
  *num_blocks = blocks;
  return cudaSuccess;
}

}  // namespace

extern "C" {

// --- registration (called from the program's static constructors and atexit handlers) ---------

void** __cudaRegisterFatBinary(void* fatCubin) {
  Runtime::get();
  // The handle only has to be unique and stable; make it point at the fat binary like the real one.
  return new void*(fatCubin);
}

void __cudaRegisterFatBinaryEnd(void** /*fatCubinHandle*/) {}

void __cudaUnregisterFatBinary(void** fatCubinHandle) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  std::erase_if(rt.kernels, [&](const auto& entry) { return entry.second.module == fatCubinHandle; });
  // Managed variables' storage stays (see Runtime::managed_variables); only the names go.
  std::erase_if(rt.symbols, [&](const auto& entry) { return entry.second.module == fatCubinHandle; });
  delete fatCubinHandle;
}

void __cudaRegisterFunction(void** fatCubinHandle, const char* hostFun, char* /*deviceFun*/, const char* deviceName,
                            int /*thread_limit*/, uint3* /*tid*/, uint3* /*bid*/, dim3* /*bDim*/, dim3* /*gDim*/,
                            int* /*wSize*/) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  rt.kernels[hostFun] = gmt::sim::Kernel{deviceName, fatCubinHandle};
}

void __cudaRegisterVar(void** fatCubinHandle, char* hostVar, char* /*deviceAddress*/, const char* deviceName,
                       int /*ext*/, size_t size, int /*constant*/, int /*global*/) {
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  rt.symbols[reinterpret_cast<std::uintptr_t>(hostVar)] = gmt::sim::Symbol{hostVar, size, deviceName, fatCubinHandle};
}

void __cudaRegisterManagedVar(void** fatCubinHandle, void** hostVarPtrAddress, char* /*deviceAddress*/,
                              const char* deviceName, int /*ext*/, size_t size, int /*constant*/, int /*global*/) {
  Runtime& rt = Runtime::get();
  // Host code reaches a __managed__ variable through this pointer, so it must point at real memory
  // before the program touches the variable. It is zero-filled: initial values live in the device
  // image, which is not interpreted here.
  void* storage = std::calloc(1, size != 0 ? size : 1);
  *hostVarPtrAddress = storage;
  std::lock_guard lock(rt.objects_mutex);
  rt.managed_variables.push_back(storage);
  rt.symbols[reinterpret_cast<std::uintptr_t>(storage)] =
      gmt::sim::Symbol{static_cast<char*>(storage), size, deviceName, fatCubinHandle};
}

char __cudaInitModule(void** /*fatCubinHandle*/) {
  Runtime::get();
  return 1;  // module (and its managed variables) ready
}

// --- launches ---------------------------------------------------------------------------------

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st* stream) {
  Runtime::get();
  t_launch_configs.push_back(LaunchConfig{gridDim, blockDim, sharedMem, stream});
  return 0;  // 0 tells the generated code to go on and call the kernel's host stub
}

cudaError_t __cudaPopCallConfiguration(dim3* gridDim, dim3* blockDim, size_t* sharedMem, void* stream) {
  if (t_launch_configs.empty()) return finish(cudaErrorMissingConfiguration);
  const LaunchConfig config = t_launch_configs.back();
  t_launch_configs.pop_back();
  *gridDim = config.grid;
  *blockDim = config.block;
  *sharedMem = config.shared_mem;
  *static_cast<cudaStream_t*>(stream) = config.stream;
  return cudaSuccess;
}

// A kernel handle is the kernel's host stub address: unique per kernel and needs no bookkeeping.
cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* hostFun) {
  if (kernel == nullptr) return finish(cudaErrorInvalidValue);
  if (!is_registered(hostFun)) return finish(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(hostFun));
  return cudaSuccess;
}

cudaError_t cudaGetKernel(cudaKernel_t* kernelPtr, const void* entryFuncAddr) {
  if (kernelPtr == nullptr) return finish(cudaErrorInvalidValue);
  if (!is_registered(entryFuncAddr)) return finish(cudaErrorInvalidDeviceFunction);
  *kernelPtr = reinterpret_cast<cudaKernel_t>(const_cast<void*>(entryFuncAddr));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** /*args*/, size_t sharedMem,
                               cudaStream_t stream) {
  return finish(launch(kernel, gridDim, blockDim, sharedMem, stream));
}

cudaError_t cudaLaunchKernel(const void* func, dim3 gridDim, dim3 blockDim, void** /*args*/, size_t sharedMem,
                             cudaStream_t stream) {
  return finish(launch(func, gridDim, blockDim, sharedMem, stream));
}

cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 gridDim, dim3 blockDim, void** /*args*/,
                                        size_t sharedMem, cudaStream_t stream) {
  return finish(launch(func, gridDim, blockDim, sharedMem, stream));
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func, void** /*args*/) {
  if (config == nullptr) return finish(cudaErrorInvalidValue);
  return finish(launch(func, config->gridDim, config->blockDim, config->dynamicSmemBytes, config->stream));
}

// --- kernel attributes ------------------------------------------------------------------------

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr) return finish(cudaErrorInvalidValue);
  if (!is_registered(func)) return finish(cudaErrorInvalidDeviceFunction);
  *attr = cudaFuncAttributes{};
  attr->maxThreadsPerBlock = static_cast<int>(kMaxThreadsPerBlock);
  attr->numRegs = 32;
  attr->ptxVersion = 90;
  attr->binaryVersion = 90;
  attr->maxDynamicSharedSizeBytes = 48 << 10;
  attr->preferredShmemCarveout = -1;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute /*attr*/, int /*value*/) {
  return finish(is_registered(func) ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache /*cacheConfig*/) {
  return finish(is_registered(func) ? cudaSuccess : cudaErrorInvalidDeviceFunction);
}

cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (name == nullptr) return finish(cudaErrorInvalidValue);
  Runtime& rt = Runtime::get();
  std::lock_guard lock(rt.objects_mutex);
  const auto it = rt.kernels.find(func);
  if (it == rt.kernels.end()) return finish(cudaErrorInvalidDeviceFunction);
  *name = it->second.name;  // the mangled device name, as the real runtime reports it
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* numBlocks, const void* func, int blockSize,
                                                                   size_t dynamicSMemSize, unsigned int flags) {
  if (flags > cudaOccupancyDisableCachingOverride) return finish(cudaErrorInvalidValue);
  return finish(occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                          size_t dynamicSMemSize) {
  return finish(occupancy(numBlocks, func, blockSize, dynamicSMemSize));
}

// --- device variables -------------------------------------------------------------------------

cudaError_t cudaGetSymbolAddress(void** devPtr, const void* symbol) {
  if (devPtr == nullptr) return finish(cudaErrorInvalidValue);
  gmt::sim::Symbol s;
  if (const cudaError_t e = find_symbol(symbol, &s); e != cudaSuccess) return finish(e);
  *devPtr = s.storage;
  return cudaSuccess;
}

cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  if (size == nullptr) return finish(cudaErrorInvalidValue);
  gmt::sim::Symbol s;
  if (const cudaError_t e = find_symbol(symbol, &s); e != cudaSuccess) return finish(e);
  *size = s.bytes;
  return cudaSuccess;
}

cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind kind) {
  return finish(copy_symbol(symbol, count, offset, kind, true, const_cast<void*>(src)));
}

cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind) {
  return finish(copy_symbol(symbol, count, offset, kind, false, dst));
}

cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                    cudaMemcpyKind kind, cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(copy_symbol(symbol, count, offset, kind, true, const_cast<void*>(src)));
}

cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  if (const cudaError_t e = check_stream(stream); e != cudaSuccess) return finish(e);
  return finish(copy_symbol(symbol, count, offset, kind, false, dst));
}

}  // extern "C"

// Per-thread-default-stream twins (see GMT_SIM_TWIN).
GMT_SIM_TWIN(__cudaLaunchKernel_ptsz, __cudaLaunchKernel,
             (cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem, cudaStream_t stream));
GMT_SIM_TWIN(cudaLaunchKernel_ptsz, cudaLaunchKernel,
             (const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem, cudaStream_t stream));
GMT_SIM_TWIN(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel,
             (const void* func, dim3 gridDim, dim3 blockDim, void** args, size_t sharedMem, cudaStream_t stream));
GMT_SIM_TWIN(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC,
             (const cudaLaunchConfig_t* config, const void* func, void** args));
GMT_SIM_TWIN(cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol,
             (const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind kind));
GMT_SIM_TWIN(cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol,
             (void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind));
GMT_SIM_TWIN(cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync,
             (const void* symbol, const void* src, size_t count, size_t offset, cudaMemcpyKind kind,
              cudaStream_t stream));
GMT_SIM_TWIN(cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync,
             (void* dst, const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind, cudaStream_t stream));
