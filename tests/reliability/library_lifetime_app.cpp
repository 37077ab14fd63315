// Links library_lifetime_holder (which allocates in its static constructor); allocates 777 bytes it leaks and
// 4096 bytes that a static object of its own frees at exit. Prints "holder=1 leaked_bytes=777".
#include <cuda_runtime.h>

#include <cstdio>

extern "C" bool holder_has_buffer();

namespace {

struct AppBuffer {
  void* buffer = nullptr;
  AppBuffer() { cudaMalloc(&buffer, 4096); }
  ~AppBuffer() { cudaFree(buffer); }  // at exit(), before any library is finalized
};

AppBuffer g_app_buffer;

}  // namespace

int main() {
  void* leaked = nullptr;
  if (cudaMalloc(&leaked, 777) != cudaSuccess) return 1;
  std::printf("holder=%d leaked_bytes=777\n", holder_has_buffer() ? 1 : 0);
  return 0;
}
