// A CUDA program built with -fsanitize=address (or thread): the sanitizer runtime resolves its interceptors
// through dlsym while it starts, before anything else runs, so our exported dlsym must answer it without
// instrumented code or intercepted libc calls. Allocates and frees known amounts through the runtime (on the
// simulated one in CI), uses the host heap and a few intercepted libc functions, prints its own account and
// exits with the code given (so that the test sees exit codes passed through).
// Usage: sanitized_app [exit_code=0]
// Output: "strtol=1234 copied=hello", then "truth: leaked_bytes=N leaked_allocations=M failed_allocations=0"
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t err = (call);                                                                      \
    if (err != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err)); \
      std::_Exit(1);                                                                               \
    }                                                                                              \
  } while (0)

__attribute__((noinline)) void* leak_device_buffer(size_t bytes) {
  void* p = nullptr;
  CHECK(cudaMalloc(&p, bytes));  // leaked on purpose
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = argc > 1 ? std::atoi(argv[1]) : 0;
  // Host heap and intercepted libc functions: the sanitizer is really in charge of this process.
  std::vector<std::string> words{"hello", "world"};
  char copied[16];
  std::strcpy(copied, words[0].c_str());
  long parsed = std::strtol("1234", nullptr, 10);
  std::printf("strtol=%ld copied=%s\n", parsed, copied);

  size_t leaked_bytes = 0, leaked_allocations = 0;
  for (size_t bytes : {size_t{1} << 20, size_t{3000}, size_t{777}}) {
    leak_device_buffer(bytes);
    leaked_bytes += bytes;
    ++leaked_allocations;
  }
  for (int i = 0; i < 100; ++i) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, 4096 + i));
    CHECK(cudaFree(p));
  }
  std::printf("truth: leaked_bytes=%zu leaked_allocations=%zu failed_allocations=0\n", leaked_bytes,
              leaked_allocations);
  return exit_code;
}
