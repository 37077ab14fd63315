// A program that dies on purpose, after leaking known amounts: the reliability tests check that its trace
// survives the death. Usage: crashy MODE [wait_ms=400]
//   segv          early leaks, wait, late leaks, then a write through a null pointer (a real SIGSEGV)
//   abort         the same, then abort()
//   sigterm-self  the same, then raise(SIGTERM)
//   busy-loop     allocates and frees until killed from outside (prints "running" once it has started)
//   usr1          installs a SIGUSR1 handler, leaks, raises SIGUSR1, exits with code 3
//   own-term      installs its own SIGTERM handler (prints, _exit(42)), leaks, raises SIGTERM
//   hup-self      leaks, raises SIGHUP; if that did not kill it (SIGHUP ignored), exits with code 0
//   steady        does not die: allocates and frees at a steady ~20k events/s for wait_ms, leaks, exits 0
//   oom-kill      leaks, asks for more memory than any device has (fails), then SIGKILLs itself at once: only a
//                 failure committed before the call returned survives (no handler runs, no periodic flush came)
// "Early" allocations are made `wait_ms` before the death (long enough for the 200 ms periodic flush when
// wait_ms >= 300), "late" ones right before it (only a flush at the signal can save them). Each mode prints
// its truth lines on stdout and flushes before dying:
//   early: leaked_bytes=N leaked_allocations=M
//   truth: leaked_bytes=N leaked_allocations=M failed_allocations=0
#include <cuda_runtime.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "sample_common.h"

namespace {

LeakTruth truth;

__attribute__((noinline)) void early_allocations() {
  for (int i = 0; i < 20; ++i) {  // freed: never leaks
    void* tmp = nullptr;
    SAMPLE_CHECK(cudaMalloc(&tmp, 4096 * (i + 1)));
    SAMPLE_CHECK(cudaFree(tmp));
  }
  for (size_t mib = 1; mib <= 3; ++mib) {
    void* kept = nullptr;
    SAMPLE_CHECK(cudaMalloc(&kept, mib << 20));  // LEAK-SITE: early_allocations
    truth.leak(mib << 20);
  }
}

__attribute__((noinline)) void late_allocations() {
  for (size_t kib : {64, 128}) {
    void* kept = nullptr;
    SAMPLE_CHECK(cudaMallocManaged(&kept, kib << 10));  // LEAK-SITE: late_allocations
    truth.leak(kib << 10);
  }
}

void leak_and_wait(int wait_ms) {
  early_allocations();
  std::printf("early: leaked_bytes=%llu leaked_allocations=%llu\n", truth.leaked_bytes, truth.leaked_allocations);
  std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  late_allocations();
  truth.print();  // flushes stdout: the line survives the death below
}

void say(const char* line) {  // async-signal-safe
  ssize_t ignored = write(STDOUT_FILENO, line, std::strlen(line));
  (void)ignored;
}

void on_usr1(int) { say("app: SIGUSR1 handler ran\n"); }

void on_term(int) {
  say("app: own SIGTERM handler ran\n");
  _exit(42);
}

[[noreturn]] void busy_loop() {
  void* first = nullptr;
  SAMPLE_CHECK(cudaMalloc(&first, 1 << 20));
  std::printf("running\n");
  std::fflush(stdout);
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // never outlive a broken test
  for (unsigned long i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
    void* p = nullptr;
    SAMPLE_CHECK(cudaMalloc(&p, 512 + (i % 13) * 1024));
    if (i % 100 != 0) SAMPLE_CHECK(cudaFree(p));  // one in a hundred stays live
    if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::exit(1);
}

void steady(int duration_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(duration_ms);
  for (unsigned i = 0; std::chrono::steady_clock::now() < end; ++i) {
    for (int j = 0; j < 20; ++j) {
      void* p = nullptr;
      SAMPLE_CHECK(cudaMalloc(&p, 512 + ((i + j) % 13) * 1024));
      SAMPLE_CHECK(cudaFree(p));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  early_allocations();
  truth.print();
}

[[noreturn]] void oom_then_kill() {
  leak_and_wait(0);
  void* too_big = nullptr;
  const size_t request = size_t{1} << 50;                          // 1 PiB: more than any device
  if (cudaMalloc(&too_big, request) == cudaSuccess) std::exit(1);  // LEAK-SITE: oom_then_kill
  std::printf("failed: request_bytes=%zu\n", request);
  std::fflush(stdout);
  raise(SIGKILL);
  std::exit(1);  // not reached
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  int wait_ms = argc > 2 ? std::atoi(argv[2]) : 400;
  if (std::strcmp(mode, "busy-loop") == 0) busy_loop();
  if (std::strcmp(mode, "oom-kill") == 0) oom_then_kill();
  if (std::strcmp(mode, "usr1") == 0) {
    struct sigaction action {};
    action.sa_handler = on_usr1;
    sigaction(SIGUSR1, &action, nullptr);
    leak_and_wait(0);
    raise(SIGUSR1);
    std::printf("app: after SIGUSR1\n");
    return 3;
  }
  if (std::strcmp(mode, "own-term") == 0) {
    struct sigaction action {};
    action.sa_handler = on_term;
    sigaction(SIGTERM, &action, nullptr);
    leak_and_wait(0);
    raise(SIGTERM);
    return 1;  // not reached
  }
  if (std::strcmp(mode, "hup-self") == 0) {
    leak_and_wait(0);
    raise(SIGHUP);
    std::printf("app: survived SIGHUP\n");
    return 0;
  }
  if (std::strcmp(mode, "steady") == 0) {
    steady(wait_ms);
    return 0;
  }
  if (std::strcmp(mode, "segv") == 0) {
    leak_and_wait(wait_ms);
    volatile int* null_pointer = nullptr;
    *null_pointer = 1;  // SIGSEGV raised by the kernel: si_code SEGV_MAPERR
    return 1;
  }
  if (std::strcmp(mode, "abort") == 0) {
    leak_and_wait(wait_ms);
    std::abort();
  }
  if (std::strcmp(mode, "sigterm-self") == 0) {
    leak_and_wait(wait_ms);
    raise(SIGTERM);
    return 1;
  }
  std::fprintf(stderr,
               "usage: crashy segv|abort|sigterm-self|busy-loop|usr1|own-term|hup-self|steady|oom-kill [wait_ms]\n");
  return 2;
}
