// The simulated runtime through its CUDA API, exactly as a program sees it.
//
// Every test starts from freshly reset devices of a known capacity: the fixture sets
// GMT_SIM_DEVICE_BYTES and calls cudaDeviceReset on each device, which re-creates the device's
// heap with the capacity the variable names. The device count is fixed before main() runs.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "schema/environment.h"
#include "tests/simcuda/sim_runtime_fixture.h"

namespace {

using namespace gmt_sim_test;

TEST_F(SimRuntime, AllocFreeRoundTripAndMemGetInfoArithmetic) {
  std::size_t free = 0;
  std::size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, kDeviceBytes);
  EXPECT_EQ(free, kDeviceBytes);

  void* big = nullptr;
  void* small = nullptr;
  ASSERT_EQ(cudaMalloc(&big, 3 * kMiB), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 3 * kMiB);
  ASSERT_EQ(cudaMalloc(&small, 1000), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 3 * kMiB - 1024);

  // Device memory is real memory: data survives a round trip, memset fills it.
  std::vector<unsigned char> in(1000);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 37);
  std::vector<unsigned char> out(1000);
  ASSERT_EQ(cudaMemcpy(small, in.data(), in.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), small, out.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cudaMemset(big, 0xab, 3 * kMiB), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(big, small, 1000, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(out.data(), static_cast<char*>(big) + 1000, 1000, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out, std::vector<unsigned char>(1000, 0xab));

  EXPECT_EQ(cudaFree(big), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 1024);
  EXPECT_EQ(cudaFree(small), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);
}

TEST_F(SimRuntime, SizesRoundUpTo512Bytes) {
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 513), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&c, 512), cudaSuccess);
  EXPECT_EQ(address(a) % 512, 0u);
  EXPECT_EQ(address(b) - address(a), 512u);
  EXPECT_EQ(address(c) - address(b), 1024u);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 512 - 1024 - 512);

  void* none = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(cudaMalloc(&none, 0), cudaSuccess);  // succeeds with a null pointer, uses nothing
  EXPECT_EQ(none, nullptr);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 2048);
  for (void* p : {a, b, c}) EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(SimRuntime, PitchedAllocationsUseRoundedPitch) {
  void* p = nullptr;
  std::size_t pitch = 0;
  ASSERT_EQ(cudaMallocPitch(&p, &pitch, 1000, 10), cudaSuccess);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 10 * 1024);
  EXPECT_EQ(cudaMemset2D(p, pitch, 7, 1000, 10), cudaSuccess);
  EXPECT_EQ(cudaMemset2D(p, pitch, 7, 1025, 10), cudaErrorInvalidPitchValue);

  cudaPitchedPtr volume{};
  ASSERT_EQ(cudaMalloc3D(&volume, cudaExtent{100, 4, 3}), cudaSuccess);
  EXPECT_EQ(volume.pitch, 512u);
  EXPECT_EQ(volume.xsize, 100u);
  EXPECT_EQ(volume.ysize, 4u);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 10 * 1024 - 512 * 4 * 3);
  EXPECT_EQ(cudaMemset3D(volume, 1, cudaExtent{100, 4, 3}), cudaSuccess);
  EXPECT_EQ(cudaFree(volume.ptr), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);
}

TEST_F(SimRuntime, OutOfMemoryWhenCapacityIsExhausted) {
  use_capacity("1048576");  // plain bytes: 1 MiB
  std::size_t free = 0;
  std::size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  ASSERT_EQ(total, kMiB);

  void* all = nullptr;
  ASSERT_EQ(cudaMalloc(&all, kMiB), cudaSuccess);
  EXPECT_EQ(free_bytes(), 0u);
  void* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMalloc(&more, kMiB + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocManaged(&more, 512), cudaErrorMemoryAllocation);  // managed shares the heap
  EXPECT_EQ(cudaFree(all), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&more, kMiB), cudaSuccess);
  EXPECT_EQ(cudaFree(more), cudaSuccess);
}

TEST_F(SimRuntime, CapacityIsRoundedDownToTheGrain) {
  use_capacity("3000000");
  std::size_t free = 0;
  std::size_t total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  EXPECT_EQ(total, 3000000u / 512 * 512);
}

TEST_F(SimRuntime, FragmentationCausesOutOfMemoryDespiteEnoughFreeBytes) {
  use_capacity("1M");
  void* block[4] = {};
  for (void*& p : block) ASSERT_EQ(cudaMalloc(&p, 256 * kKiB), cudaSuccess);
  ASSERT_EQ(cudaFree(block[0]), cudaSuccess);
  ASSERT_EQ(cudaFree(block[2]), cudaSuccess);
  EXPECT_EQ(free_bytes(), 512 * kKiB);  // twice the request is free...

  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 300 * kKiB), cudaErrorMemoryAllocation);  // ...but in two 256 KiB holes
  EXPECT_EQ(cudaMalloc(&p, 256 * kKiB), cudaSuccess);                // a fitting request still works
  EXPECT_EQ(p, block[0]);                                            // first fit: the lowest hole
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(block[1]), cudaSuccess);
  EXPECT_EQ(cudaFree(block[3]), cudaSuccess);
}

TEST_F(SimRuntime, FreedNeighboursCoalesce) {
  use_capacity("1M");
  void* block[4] = {};
  for (void*& p : block) ASSERT_EQ(cudaMalloc(&p, 256 * kKiB), cudaSuccess);
  ASSERT_EQ(cudaFree(block[1]), cudaSuccess);
  ASSERT_EQ(cudaFree(block[2]), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 512 * kKiB), cudaSuccess);  // fits only in the merged hole
  EXPECT_EQ(p, block[1]);

  // Out-of-order frees still end as one block spanning the whole device.
  for (void* q : {block[3], block[0], p}) ASSERT_EQ(cudaFree(q), cudaSuccess);
  void* all = nullptr;
  ASSERT_EQ(cudaMalloc(&all, kMiB), cudaSuccess);
  EXPECT_EQ(all, block[0]);
  EXPECT_EQ(cudaFree(all), cudaSuccess);
}

TEST_F(SimRuntime, FreeingUnknownPointersFails) {
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);

  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 4096), cudaSuccess);
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 512), cudaErrorInvalidValue);  // interior pointer
  EXPECT_EQ(cudaFreeHost(p), cudaErrorInvalidValue);                        // wrong kind of free
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // double free
  EXPECT_EQ(free_bytes(), kDeviceBytes);

  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 100), cudaSuccess);
  EXPECT_EQ(cudaFree(pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(nullptr), cudaSuccess);
}

TEST_F(SimRuntime, CopiesAreCheckedAgainstLiveAllocations) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  std::vector<char> host(2048);
  EXPECT_EQ(cudaMemcpy(p, host.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), 1001, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // overrun
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 1024, 16, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // pageable memory is not device memory
  EXPECT_EQ(cudaMemcpy(p, host.data(), 16, static_cast<cudaMemcpyKind>(9)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemset(host.data(), 0, 16), cudaErrorInvalidValue);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), p, 16, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);  // use after free
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 1024, 16, cudaMemcpyHostToHost), cudaSuccess);
}

TEST_F(SimRuntime, LastErrorIsPerThreadStickyUntilReadAndClearedByGet) {
  EXPECT_EQ(cudaPeekAtLastError(), cudaSuccess);
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);  // peek does not clear
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);

  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 512), cudaSuccess);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);  // success does not clear either
  EXPECT_EQ(cudaSetDevice(5), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);  // the latest failure wins

  cudaError_t seen_by_other_thread = cudaErrorUnknown;
  std::thread([&] { seen_by_other_thread = cudaPeekAtLastError(); }).join();
  EXPECT_EQ(seen_by_other_thread, cudaSuccess);

  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
}

TEST_F(SimRuntime, ErrorNamesAndStringsMatchTheRealRuntime) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidResourceHandle), "invalid resource handle");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(12345)), "unrecognized error code");
}

TEST_F(SimRuntime, StreamsAreValidatedHandles) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaStream_t nonblocking = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
  cudaStream_t urgent = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&urgent, cudaStreamDefault, -100), cudaSuccess);

  unsigned flags = 99;
  EXPECT_EQ(cudaStreamGetFlags(nonblocking, &flags), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned>(cudaStreamNonBlocking));
  int priority = 99;
  EXPECT_EQ(cudaStreamGetPriority(urgent, &priority), cudaSuccess);
  EXPECT_EQ(priority, -5);  // clamped to the greatest priority
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);

  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 4096, stream), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 4096);
  EXPECT_EQ(cudaMemsetAsync(p, 1, 4096, stream), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, stream), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);

  for (cudaStream_t s : {stream, nonblocking, urgent}) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaMallocAsync(&p, 512, stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST_F(SimRuntime, DevicesAreIndependentAndCurrentDeviceIsPerThread) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);

  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* on_1 = nullptr;
  ASSERT_EQ(cudaMalloc(&on_1, 5 * kMiB), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 5 * kMiB);
  cudaStream_t stream_1 = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream_1), cudaSuccess);

  int other_thread_device = -1;
  std::thread([&] { cudaGetDevice(&other_thread_device); }).join();
  EXPECT_EQ(other_thread_device, 0);  // every thread starts on device 0

  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);  // device 0 is untouched
  void* async_on_1 = nullptr;
  ASSERT_EQ(cudaMallocAsync(&async_on_1, kMiB, stream_1), cudaSuccess);  // the stream's device
  int stream_device = -1;
  EXPECT_EQ(cudaStreamGetDevice(stream_1, &stream_device), cudaSuccess);
  EXPECT_EQ(stream_device, 1);
  EXPECT_EQ(free_bytes(), kDeviceBytes);

  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, async_on_1), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 1);
  EXPECT_EQ(cudaFree(on_1), cudaSuccess);  // any device's memory can be freed from any device
  EXPECT_EQ(cudaFree(async_on_1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);
  EXPECT_EQ(cudaStreamDestroy(stream_1), cudaSuccess);
}

TEST_F(SimRuntime, DeviceResetFreesEverythingOfTheCurrentDevice) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 2 * kMiB), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* on_1 = nullptr;
  ASSERT_EQ(cudaMalloc(&on_1, kMiB), cudaSuccess);

  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - kMiB);  // the other device keeps its memory
  EXPECT_EQ(cudaFree(on_1), cudaSuccess);
}

TEST_F(SimRuntime, HostAndManagedMemory) {
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 10000), cudaSuccess);
  EXPECT_EQ(address(pinned) % 4096, 0u);
  void* mapped = nullptr;
  ASSERT_EQ(cudaHostAlloc(&mapped, 100, cudaHostAllocMapped | cudaHostAllocPortable), cudaSuccess);
  EXPECT_EQ(cudaHostAlloc(&mapped, 100, 0x100), cudaErrorInvalidValue);
  unsigned flags = 0;
  EXPECT_EQ(cudaHostGetFlags(&flags, mapped), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned>(cudaHostAllocMapped | cudaHostAllocPortable));
  EXPECT_EQ(free_bytes(), kDeviceBytes);  // host memory never counts against the device

  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, pinned), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost);
  int pageable = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, &pageable), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeUnregistered);

  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 1000, cudaMemAttachGlobal), cudaSuccess);
  EXPECT_EQ(free_bytes(), kDeviceBytes - 1024);
  std::memset(managed, 5, 1000);  // host-accessible
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, managed), cudaSuccess);
  EXPECT_EQ(attributes.type, cudaMemoryTypeManaged);
  EXPECT_EQ(attributes.hostPointer, managed);
  EXPECT_EQ(cudaMallocManaged(&managed, 0, cudaMemAttachGlobal), cudaErrorInvalidValue);

  // Page-locked memory is a valid device-side operand of a copy.
  EXPECT_EQ(cudaMemcpy(pinned, managed, 1000, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(static_cast<unsigned char*>(pinned)[999], 5);

  std::vector<char> buffer(8192);
  EXPECT_EQ(cudaHostRegister(buffer.data(), buffer.size(), cudaHostRegisterDefault), cudaSuccess);
  EXPECT_EQ(cudaHostRegister(buffer.data() + 100, 10, 0), cudaErrorHostMemoryAlreadyRegistered);
  EXPECT_EQ(cudaFreeHost(buffer.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostUnregister(buffer.data()), cudaSuccess);
  EXPECT_EQ(cudaHostUnregister(buffer.data()), cudaErrorHostMemoryNotRegistered);

  EXPECT_EQ(cudaFree(managed), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(mapped), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(SimRuntime, PropertiesAttributesAndVersions) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 1), cudaSuccess);
  EXPECT_STREQ(prop.name, "Simulated GPU 1 (gpumemtrace)");
  EXPECT_EQ(prop.totalGlobalMem, kDeviceBytes);
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 2), cudaErrorInvalidDevice);

  int value = -1;
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  EXPECT_EQ(value, 9);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  EXPECT_EQ(value, prop.multiProcessorCount);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMaxThreadsPerBlock, 0), cudaSuccess);
  EXPECT_EQ(value, 1024);
  ASSERT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrTccDriver, 0), cudaSuccess);
  EXPECT_EQ(value, 0);  // attributes without a simulated meaning read as 0

  int version = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&version), cudaSuccess);
  EXPECT_EQ(version, 13000);
  ASSERT_EQ(cudaDriverGetVersion(&version), cudaSuccess);
  EXPECT_GE(version, 13000);
}

TEST_F(SimRuntime, EventsMeasureHostTime) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaEvent_t untimed = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);

  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaErrorInvalidResourceHandle);  // not recorded
  ASSERT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(cudaEventRecord(stop, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
  EXPECT_GE(ms, 5.0f);
  ASSERT_EQ(cudaEventRecord(untimed, nullptr), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);

  for (cudaEvent_t e : {start, stop, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(start), cudaErrorInvalidResourceHandle);
}

// 8 threads x 10k allocations and frees, half on each device, each thread keeping a window of live
// allocations whose first and last bytes carry a marker: a block handed out twice would have its
// marker overwritten. At the end every byte must be free again, in one block.
TEST_F(SimRuntime, ConcurrentThreadsEndInAnExactState) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 10000;
  constexpr std::size_t kWindow = 16;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &failures] {
      struct Live {
        unsigned char* p;
        std::size_t bytes;
        unsigned char marker;
      };
      auto release = [&failures](const Live& live) {
        if (live.p[0] != live.marker || live.p[live.bytes - 1] != live.marker) ++failures;
        if (cudaFree(live.p) != cudaSuccess) ++failures;
      };
      if (cudaSetDevice(t % 2) != cudaSuccess) ++failures;
      std::vector<Live> window;
      for (int i = 0; i < kIterations; ++i) {
        const std::size_t bytes = 1 + static_cast<std::size_t>(i * 7919 + t * 104729) % 8192;
        void* p = nullptr;
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
          ++failures;
          continue;
        }
        const auto marker = static_cast<unsigned char>(t * 31 + i);
        auto* bytes_p = static_cast<unsigned char*>(p);
        bytes_p[0] = marker;
        bytes_p[bytes - 1] = marker;
        window.push_back({bytes_p, bytes, marker});
        if (window.size() == kWindow) {
          // Free from the middle as well as the ends, so holes open all over the heap.
          const std::size_t victim = static_cast<std::size_t>(i) % kWindow;
          release(window[victim]);
          window.erase(window.begin() + static_cast<std::ptrdiff_t>(victim));
        }
      }
      for (const Live& live : window) release(live);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);

  for (int device = 0; device < 2; ++device) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(free_bytes(), kDeviceBytes);
    void* all = nullptr;
    EXPECT_EQ(cudaMalloc(&all, kDeviceBytes), cudaSuccess);  // only possible if fully coalesced
    EXPECT_EQ(cudaFree(all), cudaSuccess);
  }
}

}  // namespace

// IPC handles: the handle names this process, so opening it here is refused (as on a real driver); a forked
// child opens it as a fresh range of the exporter's size on the exporter's device. The simulated driver entry
// points describe both sides.
TEST_F(SimRuntime, IpcHandlesOpenInAnotherProcessOnly) {
  using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  using PointerAttributeFn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  using DeviceNameFn = CUresult (*)(char*, int, CUdevice);
  void* range_fn = nullptr;
  void* attribute_fn = nullptr;
  void* name_fn = nullptr;
  void* missing_fn = &range_fn;
  cudaDriverEntryPointQueryResult status{};
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &range_fn, 13000, 0, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuPointerGetAttribute", &attribute_fn, 13000, 0, &status), cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuDeviceGetName", &name_fn, 13000, 0, &status), cudaSuccess);
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuLaunchKernel", &missing_fn, 13000, 0, &status), cudaSuccess);
  EXPECT_EQ(status, cudaDriverEntryPointSymbolNotFound);
  EXPECT_EQ(missing_fn, nullptr);
  ASSERT_NE(range_fn, nullptr);
  ASSERT_NE(attribute_fn, nullptr);
  char name[64] = {};
  ASSERT_EQ(reinterpret_cast<DeviceNameFn>(name_fn)(name, sizeof name, 1), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Simulated GPU 1 (gpumemtrace)");

  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  void* exported = nullptr;
  ASSERT_EQ(cudaMalloc(&exported, 3 * kMiB), cudaSuccess);
  cudaIpcMemHandle_t handle{};
  ASSERT_EQ(cudaIpcGetMemHandle(&handle, exported), cudaSuccess);
  void* opened = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&opened, handle, cudaIpcMemLazyEnablePeerAccess), cudaErrorDeviceUninitialized);
  cudaGetLastError();
  EXPECT_EQ(cudaIpcCloseMemHandle(exported), cudaErrorInvalidValue);  // not an opened handle
  cudaGetLastError();

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes say what failed: 0 only if every check holds.
    cudaSetDevice(0);
    void* p = nullptr;
    if (cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess || !p) _exit(1);
    CUdeviceptr base = 0;
    size_t size = 0;
    if (reinterpret_cast<AddressRangeFn>(range_fn)(&base, &size, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
      _exit(2);
    if (base != reinterpret_cast<CUdeviceptr>(p) || size != 3 * kMiB) _exit(3);
    int device = -1;
    if (reinterpret_cast<PointerAttributeFn>(attribute_fn)(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                           reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
      _exit(4);
    if (device != 1) _exit(5);                                // the exporter's device, not the current one
    if (cudaMemset(p, 1, 3 * kMiB) != cudaSuccess) _exit(6);  // usable like device memory
    if (cudaIpcCloseMemHandle(p) != cudaSuccess) _exit(7);
    if (cudaIpcCloseMemHandle(p) != cudaErrorInvalidValue) _exit(8);  // closed already
    _exit(0);
  }
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 0);
  EXPECT_EQ(cudaFree(exported), cudaSuccess);
}
