// A parent and a child that both use CUDA: the child is created before the parent touches CUDA (a CUDA
// context does not survive fork), either by fork alone or by fork + exec of this same program.
// Usage: forking fork|exec     (the exec'ed child runs as: forking child)
// The parent leaks 1 MiB, the child 2 MiB; each process must get its own trace.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "sample_common.h"

__attribute__((noinline)) void child_work() {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, 2 << 20));  // LEAK-SITE: child_work
  LeakTruth truth;
  truth.leak(2 << 20);
  truth.print();
}

__attribute__((noinline)) void parent_work() {
  void* p = nullptr;
  SAMPLE_CHECK(cudaMalloc(&p, 1 << 20));  // LEAK-SITE: parent_work
  LeakTruth truth;
  truth.leak(1 << 20);
  truth.print();
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "fork";
  if (std::strcmp(mode, "child") == 0) {
    child_work();
    return 0;
  }
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    if (std::strcmp(mode, "exec") == 0) {
      execl("/proc/self/exe", argv[0], "child", static_cast<char*>(nullptr));
      _exit(127);
    }
    child_work();
    std::exit(0);  // a normal exit: atexit handlers (ours too) flush the child's trace
  }
  int status = 0;
  waitpid(pid, &status, 0);
  parent_work();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
