// The kernel side, driven the way nvcc-generated host code drives it: register a fat binary with
// a kernel and device variables from "static constructors", push a launch configuration, pop it in
// the kernel's host stub and launch. kernel_smoke.cu does the same through a real nvcc build.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>

// Declared in nvcc-internal headers only; signatures as in crt/host_runtime.h and
// crt/device_functions.h.
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
}

namespace {

// Stand-ins for what nvcc emits: the fat binary wrapper, a kernel's host stub, a __device__
// variable's host shadow and a __managed__ variable's host-side pointer.
const unsigned char g_fatbin[16] = {};
void kernel_stub() {}
void unregistered_stub() {}
int g_device_var[4] = {1, 2, 3, 4};
double* g_managed_var = nullptr;

const void* stub(void (*fn)()) { return reinterpret_cast<const void*>(fn); }

class SimKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    module_ = __cudaRegisterFatBinary(const_cast<unsigned char*>(g_fatbin));
    ASSERT_NE(module_, nullptr);
    __cudaRegisterFunction(module_, static_cast<const char*>(stub(kernel_stub)), const_cast<char*>("_Z6kernelv"),
                           "_Z6kernelv", -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterVar(module_, reinterpret_cast<char*>(g_device_var), const_cast<char*>("g_device_var"), "g_device_var",
                      0, sizeof g_device_var, 0, 0);
    __cudaRegisterManagedVar(module_, reinterpret_cast<void**>(&g_managed_var), const_cast<char*>("g_managed_var"),
                             "g_managed_var", 0, sizeof(double), 0, 0);
    __cudaRegisterFatBinaryEnd(module_);
    cudaGetLastError();
  }
  void TearDown() override {
    if (module_ != nullptr) __cudaUnregisterFatBinary(module_);
  }

  void** module_ = nullptr;
};

TEST_F(SimKernels, TripleChevronLaunchSequenceSucceeds) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(__cudaPushCallConfiguration(dim3(40, 2), dim3(256), 1024, stream), 0u);

  dim3 grid;
  dim3 block;
  size_t shared = 0;
  cudaStream_t popped = nullptr;
  ASSERT_EQ(__cudaPopCallConfiguration(&grid, &block, &shared, &popped), cudaSuccess);
  EXPECT_EQ(grid.x, 40u);
  EXPECT_EQ(grid.y, 2u);
  EXPECT_EQ(block.x, 256u);
  EXPECT_EQ(shared, 1024u);
  EXPECT_EQ(popped, stream);
  EXPECT_EQ(__cudaPopCallConfiguration(&grid, &block, &shared, &popped), cudaErrorMissingConfiguration);
  cudaGetLastError();

  cudaKernel_t kernel = nullptr;
  ASSERT_EQ(__cudaGetKernel(&kernel, stub(kernel_stub)), cudaSuccess);
  EXPECT_EQ(__cudaLaunchKernel(kernel, grid, block, nullptr, shared, popped), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST_F(SimKernels, LaunchesAreValidatedLikeTheDriverDoes) {
  const void* kernel = stub(kernel_stub);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1024), nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(1025), nullptr, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(0), dim3(32), nullptr, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1, 65536), dim3(32), nullptr, 0, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaLaunchKernel(kernel, dim3(1), dim3(32), nullptr, 0, reinterpret_cast<cudaStream_t>(0x1234)),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaLaunchKernel(stub(unregistered_stub), dim3(1), dim3(32), nullptr, 0, nullptr),
            cudaErrorInvalidDeviceFunction);
  cudaKernel_t handle = nullptr;
  EXPECT_EQ(__cudaGetKernel(&handle, stub(unregistered_stub)), cudaErrorInvalidDeviceFunction);

  cudaFuncAttributes attributes{};
  ASSERT_EQ(cudaFuncGetAttributes(&attributes, kernel), cudaSuccess);
  EXPECT_EQ(attributes.maxThreadsPerBlock, 1024);
  int blocks = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, 0), cudaSuccess);
  EXPECT_EQ(blocks, 8);
  cudaGetLastError();
}

TEST_F(SimKernels, DeviceVariablesLiveInTheirHostShadows) {
  const int values[4] = {10, 20, 30, 40};
  ASSERT_EQ(cudaMemcpyToSymbol(g_device_var, values, sizeof values, 0, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(g_device_var[3], 40);
  int back[2] = {};
  ASSERT_EQ(cudaMemcpyFromSymbol(back, g_device_var, sizeof back, 2 * sizeof(int), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back[0], 30);
  EXPECT_EQ(back[1], 40);
  EXPECT_EQ(cudaMemcpyToSymbol(g_device_var, values, sizeof values, 4, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);  // past the end of the variable
  int not_a_symbol = 0;
  EXPECT_EQ(cudaMemcpyToSymbol(&not_a_symbol, values, 4, 0, cudaMemcpyHostToDevice), cudaErrorInvalidSymbol);

  void* address = nullptr;
  ASSERT_EQ(cudaGetSymbolAddress(&address, g_device_var), cudaSuccess);
  EXPECT_EQ(address, static_cast<void*>(g_device_var));
  size_t size = 0;
  ASSERT_EQ(cudaGetSymbolSize(&size, g_device_var), cudaSuccess);
  EXPECT_EQ(size, sizeof g_device_var);
  // The symbol's address is usable as device memory in ordinary copies.
  EXPECT_EQ(cudaMemset(address, 0, sizeof g_device_var), cudaSuccess);
  EXPECT_EQ(g_device_var[0], 0);

  // __managed__ variables: registration points the host-side pointer at real memory.
  ASSERT_NE(g_managed_var, nullptr);
  EXPECT_EQ(__cudaInitModule(module_), 1);
  *g_managed_var = 2.5;
  double managed_back = 0;
  ASSERT_EQ(cudaMemcpyFromSymbol(&managed_back, g_managed_var, sizeof(double), 0, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(managed_back, 2.5);
  cudaGetLastError();
}

TEST_F(SimKernels, UnregisteringTheModuleForgetsItsKernelsAndVariables) {
  __cudaUnregisterFatBinary(module_);
  module_ = nullptr;
  EXPECT_EQ(cudaLaunchKernel(stub(kernel_stub), dim3(1), dim3(1), nullptr, 0, nullptr), cudaErrorInvalidDeviceFunction);
  size_t size = 0;
  EXPECT_EQ(cudaGetSymbolSize(&size, g_device_var), cudaErrorInvalidSymbol);
  cudaGetLastError();
}

}  // namespace
