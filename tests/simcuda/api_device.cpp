// Device management: enumeration, the per-thread current device, properties and attributes,
// versions, reset and synchronisation.
//
// The simulated device describes itself as a Hopper-class part (compute capability 9.0, H100/H200
// shaped limits) so code that branches on properties takes its usual path; only the name and the
// memory size say what it really is.
#include <cstdio>
#include <cstring>
#include <mutex>

#include <cuda_profiler_api.h>

#include "sim_runtime.h"

using gmt::sim::finish;
using gmt::sim::Runtime;

namespace {

constexpr int kRuntimeVersion = CUDART_VERSION;  // 13000 for the toolkit we build against
// "Simulated GPU 0 (gpumemtrace)": says what it is in every report that names the device.
constexpr char kDeviceNameFormat[] = "Simulated GPU %d (gpumemtrace)";

// Defaults of the cudaLimit values (indexed by the enum), as a fresh Hopper context reports them.
constexpr int kLimitCount = cudaLimitPersistingL2CacheSize + 1;
constexpr std::size_t kDefaultLimits[kLimitCount] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};

std::size_t device_capacity(Runtime& rt, int ordinal) {
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  return device->heap.capacity();
}

cudaDeviceProp make_properties(int ordinal, std::size_t capacity) {
  cudaDeviceProp p{};
  std::snprintf(p.name, sizeof p.name, kDeviceNameFormat, ordinal);
  // A stable, recognisable UUID per ordinal: "gmtsim" followed by the ordinal.
  std::memcpy(p.uuid.bytes, "gmtsim", 6);
  p.uuid.bytes[15] = static_cast<char>(ordinal);
  p.totalGlobalMem = capacity;
  p.sharedMemPerBlock = 48 << 10;
  p.regsPerBlock = 65536;
  p.warpSize = 32;
  p.memPitch = 2147483647;
  p.maxThreadsPerBlock = 1024;
  p.maxThreadsDim[0] = 1024;
  p.maxThreadsDim[1] = 1024;
  p.maxThreadsDim[2] = 64;
  p.maxGridSize[0] = 2147483647;
  p.maxGridSize[1] = 65535;
  p.maxGridSize[2] = 65535;
  p.totalConstMem = 64 << 10;
  p.major = 9;
  p.minor = 0;
  p.textureAlignment = 512;
  p.texturePitchAlignment = 32;
  p.multiProcessorCount = 132;
  p.canMapHostMemory = 1;
  p.maxTexture1D = 131072;
  p.surfaceAlignment = 512;
  p.concurrentKernels = 1;
  p.pciBusID = ordinal + 1;  // distinct per device, never 0 so it does not look unset
  p.asyncEngineCount = 3;
  p.unifiedAddressing = 1;
  p.memoryBusWidth = 5120;
  p.l2CacheSize = 50 << 20;
  p.persistingL2CacheMaxSize = 30 << 20;
  p.maxThreadsPerMultiProcessor = 2048;
  p.streamPrioritiesSupported = 1;
  p.globalL1CacheSupported = 1;
  p.localL1CacheSupported = 1;
  p.sharedMemPerMultiprocessor = 228 << 10;
  p.regsPerMultiprocessor = 65536;
  p.managedMemory = 1;
  p.concurrentManagedAccess = 1;
  p.computePreemptionSupported = 1;
  p.cooperativeLaunch = 1;
  p.sharedMemPerBlockOptin = 227 << 10;
  p.maxBlocksPerMultiProcessor = 32;
  p.accessPolicyMaxWindowSize = 128 << 20;
  p.reservedSharedMemPerBlock = 1 << 10;
  p.hostRegisterSupported = 1;
  p.memoryPoolsSupported = 1;
  p.clusterLaunch = 1;
  p.hostNumaId = -1;
  return p;
}

// Attributes mirror the properties, so the two query paths can never disagree.
int attribute_value(cudaDeviceAttr attr, const cudaDeviceProp& p) {
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return p.maxThreadsPerBlock;
    case cudaDevAttrMaxBlockDimX: return p.maxThreadsDim[0];
    case cudaDevAttrMaxBlockDimY: return p.maxThreadsDim[1];
    case cudaDevAttrMaxBlockDimZ: return p.maxThreadsDim[2];
    case cudaDevAttrMaxGridDimX: return p.maxGridSize[0];
    case cudaDevAttrMaxGridDimY: return p.maxGridSize[1];
    case cudaDevAttrMaxGridDimZ: return p.maxGridSize[2];
    case cudaDevAttrMaxSharedMemoryPerBlock: return static_cast<int>(p.sharedMemPerBlock);
    case cudaDevAttrTotalConstantMemory: return static_cast<int>(p.totalConstMem);
    case cudaDevAttrWarpSize: return p.warpSize;
    case cudaDevAttrMaxPitch: return static_cast<int>(p.memPitch);
    case cudaDevAttrMaxRegistersPerBlock: return p.regsPerBlock;
    case cudaDevAttrClockRate: return 1980000;  // kHz; no longer a property in CUDA 13
    case cudaDevAttrMemoryClockRate: return 2619000;
    case cudaDevAttrTextureAlignment: return static_cast<int>(p.textureAlignment);
    case cudaDevAttrGpuOverlap: return 1;
    case cudaDevAttrMultiProcessorCount: return p.multiProcessorCount;
    case cudaDevAttrIntegrated: return p.integrated;
    case cudaDevAttrCanMapHostMemory: return p.canMapHostMemory;
    case cudaDevAttrSurfaceAlignment: return static_cast<int>(p.surfaceAlignment);
    case cudaDevAttrConcurrentKernels: return p.concurrentKernels;
    case cudaDevAttrPciBusId: return p.pciBusID;
    case cudaDevAttrPciDeviceId: return p.pciDeviceID;
    case cudaDevAttrPciDomainId: return p.pciDomainID;
    case cudaDevAttrGlobalMemoryBusWidth: return p.memoryBusWidth;
    case cudaDevAttrL2CacheSize: return p.l2CacheSize;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return p.maxThreadsPerMultiProcessor;
    case cudaDevAttrAsyncEngineCount: return p.asyncEngineCount;
    case cudaDevAttrUnifiedAddressing: return p.unifiedAddressing;
    case cudaDevAttrTexturePitchAlignment: return static_cast<int>(p.texturePitchAlignment);
    case cudaDevAttrComputeCapabilityMajor: return p.major;
    case cudaDevAttrComputeCapabilityMinor: return p.minor;
    case cudaDevAttrStreamPrioritiesSupported: return p.streamPrioritiesSupported;
    case cudaDevAttrGlobalL1CacheSupported: return p.globalL1CacheSupported;
    case cudaDevAttrLocalL1CacheSupported: return p.localL1CacheSupported;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return static_cast<int>(p.sharedMemPerMultiprocessor);
    case cudaDevAttrMaxRegistersPerMultiprocessor: return p.regsPerMultiprocessor;
    case cudaDevAttrManagedMemory: return p.managedMemory;
    case cudaDevAttrConcurrentManagedAccess: return p.concurrentManagedAccess;
    case cudaDevAttrComputePreemptionSupported: return p.computePreemptionSupported;
    case cudaDevAttrCooperativeLaunch: return p.cooperativeLaunch;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return static_cast<int>(p.sharedMemPerBlockOptin);
    case cudaDevAttrHostRegisterSupported: return p.hostRegisterSupported;
    case cudaDevAttrMaxBlocksPerMultiprocessor: return p.maxBlocksPerMultiProcessor;
    case cudaDevAttrMaxPersistingL2CacheSize: return p.persistingL2CacheMaxSize;
    case cudaDevAttrMaxAccessPolicyWindowSize: return p.accessPolicyMaxWindowSize;
    case cudaDevAttrReservedSharedMemoryPerBlock: return static_cast<int>(p.reservedSharedMemPerBlock);
    case cudaDevAttrMemoryPoolsSupported: return p.memoryPoolsSupported;
    case cudaDevAttrClusterLaunch: return p.clusterLaunch;
    case cudaDevAttrHostNumaId: return p.hostNumaId;
    default: return 0;  // everything else reads as "not supported"
  }
}

}  // namespace

cudaDeviceProp gmt::sim::device_properties(int ordinal) {
  return make_properties(ordinal, device_capacity(Runtime::get(), ordinal));
}

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  Runtime& rt = Runtime::get();
  if (count == nullptr) return finish(cudaErrorInvalidValue);
  *count = rt.device_count();
  return rt.device_count() == 0 ? finish(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (const cudaError_t e = Runtime::get().check_device(device); e != cudaSuccess) return finish(e);
  gmt::sim::current_device() = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  Runtime& rt = Runtime::get();
  if (device == nullptr) return finish(cudaErrorInvalidValue);
  if (rt.device_count() == 0) return finish(cudaErrorNoDevice);
  *device = gmt::sim::current_device();
  return cudaSuccess;
}

cudaError_t cudaInitDevice(int device, unsigned int /*deviceFlags*/, unsigned int /*flags*/) {
  return finish(Runtime::get().check_device(device));
}

cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  Runtime& rt = Runtime::get();
  if ((flags & ~static_cast<unsigned>(cudaDeviceMask)) != 0) return finish(cudaErrorInvalidValue);
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  device->flags = flags;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  Runtime& rt = Runtime::get();
  if (flags == nullptr) return finish(cudaErrorInvalidValue);
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  *flags = device->flags;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  // Every operation completed when it was issued; there is never anything to wait for, but pools give back their
  // reservation above their release threshold (Pool::reserved).
  const cudaError_t e = Runtime::get().check_device(gmt::sim::current_device());
  if (e == cudaSuccess) Runtime::get().release_pool_reservations();
  return finish(e);
}

cudaError_t cudaDeviceReset(void) {
  Runtime& rt = Runtime::get();
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  rt.reset_device(ordinal);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  Runtime& rt = Runtime::get();
  if (prop == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  *prop = make_properties(device, device_capacity(rt, device));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  Runtime& rt = Runtime::get();
  if (value == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  *value = attribute_value(attr, make_properties(device, device_capacity(rt, device)));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  Runtime& rt = Runtime::get();
  if (pciBusId == nullptr || len <= 0) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  std::snprintf(pciBusId, static_cast<std::size_t>(len), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}

cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop) {
  Runtime& rt = Runtime::get();
  if (device == nullptr || prop == nullptr) return finish(cudaErrorInvalidValue);
  if (rt.device_count() == 0) return finish(cudaErrorNoDevice);
  *device = 0;  // all simulated devices are identical
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* driverVersion) {
  Runtime::get();
  if (driverVersion == nullptr) return finish(cudaErrorInvalidValue);
  *driverVersion = kRuntimeVersion;  // a "driver" exactly as new as the runtime
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* runtimeVersion) {
  Runtime::get();
  if (runtimeVersion == nullptr) return finish(cudaErrorInvalidValue);
  *runtimeVersion = kRuntimeVersion;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  Runtime::get();
  // Hopper's range: 0 is the lowest priority, -5 the highest.
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  Runtime& rt = Runtime::get();
  if (canAccessPeer == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(device); e != cudaSuccess) return finish(e);
  if (const cudaError_t e = rt.check_device(peerDevice); e != cudaSuccess) return finish(e);
  *canAccessPeer = device != peerDevice ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  Runtime& rt = Runtime::get();
  if (flags != 0) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = rt.check_device(peerDevice); e != cudaSuccess) return finish(e);
  return cudaSuccess;  // one address space: peers can always see each other
}

cudaError_t cudaDeviceDisablePeerAccess(int peerDevice) { return finish(Runtime::get().check_device(peerDevice)); }

cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache /*cacheConfig*/) {
  return finish(Runtime::get().check_device(gmt::sim::current_device()));  // a hint; nothing to tune
}

cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* pCacheConfig) {
  if (pCacheConfig == nullptr) return finish(cudaErrorInvalidValue);
  if (const cudaError_t e = Runtime::get().check_device(gmt::sim::current_device()); e != cudaSuccess) {
    return finish(e);
  }
  *pCacheConfig = cudaFuncCachePreferNone;
  return cudaSuccess;
}

// Profiler control brackets regions for an attached profiler; there is none to tell.
cudaError_t cudaProfilerStart(void) {
  Runtime::get();
  return cudaSuccess;
}

cudaError_t cudaProfilerStop(void) {
  Runtime::get();
  return cudaSuccess;
}

cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  Runtime& rt = Runtime::get();
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  if (limit < 0 || limit >= kLimitCount) return finish(cudaErrorUnsupportedLimit);
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  device->limits[limit] = value;  // remembered for cudaDeviceGetLimit; nothing else reads it
  return cudaSuccess;
}

cudaError_t cudaDeviceGetLimit(size_t* pValue, cudaLimit limit) {
  Runtime& rt = Runtime::get();
  if (pValue == nullptr) return finish(cudaErrorInvalidValue);
  const int ordinal = gmt::sim::current_device();
  if (const cudaError_t e = rt.check_device(ordinal); e != cudaSuccess) return finish(e);
  if (limit < 0 || limit >= kLimitCount) return finish(cudaErrorUnsupportedLimit);
  gmt::sim::Device* device = rt.device(ordinal);
  std::lock_guard lock(device->mutex);
  const auto stored = device->limits.find(limit);
  *pValue = stored != device->limits.end() ? stored->second : kDefaultLimits[limit];
  return cudaSuccess;
}

}  // extern "C"
