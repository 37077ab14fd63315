// Ways a process ends without running exit handlers: _exit, _Exit, exec without fork, abort, SIGKILL. Each mode
// makes COUNT allocations of 1 MiB + i bytes right before it ends (well inside the writer's 200 ms interval), so
// that only a flush on the way out can keep them. test_exit_paths checks each trace against these numbers.
// sigkill-pending first makes COUNT allocations and waits half a second (the writer commits them), then COUNT
// more that are still in the buffers when it kills itself: the trace holds the first COUNT, and `run` counts the
// last COUNT as lost.
// Usage: exit_paths _exit|_Exit|execv|exec-fails|abort|sigkill|sigkill-freed|sigkill-pending|after-exec COUNT
#include <cuda_runtime.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace {

void allocate(int count, bool free_them) {
  for (int i = 0; i < count; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, (1u << 20) + i) != cudaSuccess) std::_Exit(1);
    if (free_them) cudaFree(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(
        stderr, "usage: exit_paths _exit|_Exit|execv|exec-fails|abort|sigkill|sigkill-freed|sigkill-pending|after-exec "
                "COUNT\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int count = std::atoi(argv[2]);
  if (mode == "after-exec") {  // the image an exec started: no CUDA call, so no trace of its own
    std::printf("after exec\n");
    return 0;
  }
  if (mode == "sigkill-pending") {
    allocate(count, false);
    timespec pause{0, 500'000'000};  // past the writer's 200 ms interval, twice
    nanosleep(&pause, nullptr);
  }
  allocate(count, mode == "sigkill-freed");
  std::fflush(stdout);
  if (mode == "_exit") _exit(5);
  if (mode == "_Exit") _Exit(6);
  if (mode == "execv" || mode == "exec-fails") {
    char* args[] = {argv[0], const_cast<char*>("after-exec"), argv[2], nullptr};
    execv(mode == "execv" ? argv[0] : "/nonexistent/exit_paths", args);
    // Failed: the process goes on, and its trace must not stay marked complete until it ends for real.
    std::printf("exec failed: %s\n", std::strerror(errno));
    allocate(2, false);
    return 7;
  }
  if (mode == "abort") std::abort();
  if (mode == "sigkill" || mode == "sigkill-freed" || mode == "sigkill-pending") kill(getpid(), SIGKILL);
  return 3;
}
