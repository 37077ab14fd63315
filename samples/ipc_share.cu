// Device memory shared between two processes with CUDA IPC, for the imported-memory tests.
//   ipc_share            the exporter: starts the importer (itself, "ipc_share import") before CUDA is
//                        initialised, allocates two buffers on device 0, sends their IPC handles to the importer
//                        through its stdin, waits for it, then frees both buffers. Exit 0 only if both
//                        processes succeeded.
//   ipc_share import     the importer: opens both handles on device 1 when there are 2 devices or more (else on
//                        device 0), uses them, closes the first and leaves the second open on purpose (the
//                        driver unmaps it at exit). It also allocates a small buffer of its own.
//
// Truth (printed as "ipc-truth: ..." lines):
//   exporter: device 0, kSharedBytes + kKeptBytes allocated and freed, nothing leaked;
//   importer: kOwnBytes of its own memory (freed), kSharedBytes + kKeptBytes imported from device 0 at its peak,
//             one handle (kKeptBytes) left open, opened in open_and_forget (its marked line).
// Sizes are multiples of 2 MiB, the granularity of large device allocations: the opened ranges are exact.
#include <cuda_runtime.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sample_common.h"

extern char** environ;

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kSharedBytes = 6 * kMiB;  // opened, used and closed by the importer
constexpr size_t kKeptBytes = 2 * kMiB;    // opened and left open by the importer
constexpr size_t kOwnBytes = 1 * kMiB;     // the importer's own allocation

bool read_all(int fd, void* data, size_t size) {
  auto* bytes = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, bytes, size);
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, bytes, size);
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

__attribute__((noinline)) void* open_to_use(const cudaIpcMemHandle_t& handle) {
  void* p = nullptr;
  SAMPLE_CHECK(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess));  // IPC-OPEN: closed
  return p;
}

__attribute__((noinline)) void* open_and_forget(const cudaIpcMemHandle_t& handle) {
  void* p = nullptr;
  SAMPLE_CHECK(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess));  // IPC-OPEN: left_open
  return p;
}

int import_main() {
  cudaIpcMemHandle_t handles[2];
  if (!read_all(STDIN_FILENO, handles, sizeof handles)) {
    std::fprintf(stderr, "ipc_share import: could not read the handles from stdin\n");
    return 2;
  }
  int devices = 0;
  SAMPLE_CHECK(cudaGetDeviceCount(&devices));
  const int device = devices >= 2 ? 1 : 0;
  SAMPLE_CHECK(cudaSetDevice(device));
  void* own = nullptr;
  SAMPLE_CHECK(cudaMalloc(&own, kOwnBytes));

  void* shared = open_to_use(handles[0]);
  void* kept = open_and_forget(handles[1]);
  // Use them: the exporter filled the first with 7s; copy a piece here and check it, then write to both.
  std::vector<unsigned char> check(4096);
  SAMPLE_CHECK(cudaMemcpy(check.data(), shared, check.size(), cudaMemcpyDeviceToHost));
  cudaDeviceProp prop{};
  SAMPLE_CHECK(cudaGetDeviceProperties(&prop, device));
  const bool simulated = std::strncmp(prop.name, "Simulated GPU", 13) == 0;  // the simulator shares no contents
  if (!simulated && check[0] != 7) {
    std::fprintf(stderr, "ipc_share import: read %d from the shared buffer, expected 7\n", check[0]);
    return 3;
  }
  SAMPLE_CHECK(cudaMemcpy(own, shared, kOwnBytes, cudaMemcpyDeviceToDevice));
  SAMPLE_CHECK(cudaMemset(kept, 1, kKeptBytes));
  SAMPLE_CHECK(cudaDeviceSynchronize());

  SAMPLE_CHECK(cudaIpcCloseMemHandle(shared));
  SAMPLE_CHECK(cudaFree(own));
  std::printf("ipc-truth: importer device=%d own_bytes=%zu imported_bytes=%zu left_open_bytes=%zu\n", device, kOwnBytes,
              kSharedBytes + kKeptBytes, kKeptBytes);
  std::fflush(stdout);
  (void)kept;  // left open on purpose
  return 0;
}

int export_main(const char* self) {
  // The importer starts before this process touches CUDA: a process must not fork after initialising it.
  int to_child[2];
  if (pipe(to_child) != 0) return 2;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_addclose(&actions, to_child[1]);
  char import_arg[] = "import";
  char* child_argv[] = {const_cast<char*>(self), import_arg, nullptr};
  pid_t child = 0;
  if (posix_spawn(&child, "/proc/self/exe", &actions, nullptr, child_argv, environ) != 0) {
    std::fprintf(stderr, "ipc_share: could not start the importer\n");
    return 2;
  }
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);

  SAMPLE_CHECK(cudaSetDevice(0));
  void* shared = nullptr;
  void* kept = nullptr;
  SAMPLE_CHECK(cudaMalloc(&shared, kSharedBytes));
  SAMPLE_CHECK(cudaMalloc(&kept, kKeptBytes));
  SAMPLE_CHECK(cudaMemset(shared, 7, kSharedBytes));
  SAMPLE_CHECK(cudaDeviceSynchronize());
  cudaIpcMemHandle_t handles[2];
  SAMPLE_CHECK(cudaIpcGetMemHandle(&handles[0], shared));
  SAMPLE_CHECK(cudaIpcGetMemHandle(&handles[1], kept));
  const bool sent = write_all(to_child[1], handles, sizeof handles);
  close(to_child[1]);

  // The memory stays allocated until the importer is done with it.
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 2;
  SAMPLE_CHECK(cudaFree(kept));
  SAMPLE_CHECK(cudaFree(shared));
  if (!sent || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ipc_share: the importer failed (status %d)\n", status);
    return 1;
  }
  std::printf("ipc-truth: exporter device=0 allocated_bytes=%zu\n", kSharedBytes + kKeptBytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "import") == 0) return import_main();
  return export_main(argv[0]);
}
