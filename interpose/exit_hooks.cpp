// _exit, _Exit and the exec family end the process image without running exit handlers, so neither our atexit
// flush nor our destructor runs (recorder/lifecycle.cpp): without these hooks, whatever the writer had not
// written yet (up to 200 ms of events, or all of them before the trace existed) was lost and the trace looked
// like a clean run that recorded little or nothing. Each hook is thin: it asks the writer thread for a final
// flush that also marks the trace complete, waits for it at most kFlushTimeoutMs, and calls the real function.
// The flush is async-signal-safe (atomics and nanosleep in this thread: _exit and execve are often called from
// signal handlers and forked children), never waits on a lock this thread holds, and gives up after the bound
// when the writer is stuck (e.g. on a lock a thread interrupted by the signal holds). A raw exit_group syscall
// cannot be interposed: the trace then stays incomplete (docs/reliability.md).
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>

#include "interpose/driver_hook_table.h"
#include "recorder/recorder.h"

namespace {

// As long as a dying thread waits for the writer in the fatal-signal flush (recorder/fatal_signals.cpp): a
// normal flush takes milliseconds; the bound only matters when the writer is stuck.
constexpr int kFlushTimeoutMs = 2000;

// The functions hooked here, resolved at load (not in a signal handler: dlsym is not async-signal-safe).
#define GMT_EXIT_HOOKS(X) X(_exit) X(_Exit) X(execve) X(execv) X(execvp) X(execvpe) X(fexecve)
enum class Fn : int {
#define GMT_EXIT_ENUM(name) name,
  GMT_EXIT_HOOKS(GMT_EXIT_ENUM) Count
#undef GMT_EXIT_ENUM
};
constexpr const char* kNames[] = {
#define GMT_EXIT_NAME(name) #name,
    GMT_EXIT_HOOKS(GMT_EXIT_NAME)
#undef GMT_EXIT_NAME
};
std::atomic<void*> g_real[static_cast<int>(Fn::Count)];

void* resolve(Fn fn) {
  void* real = g_real[static_cast<int>(fn)].load(std::memory_order_acquire);
  if (real) return real;
  gmt::interpose::DlsymFn dlsym_of_libc = gmt::interpose::real_dlsym();
  // RTLD_NEXT, asked from this library: libc's, or another interposer's after ours (a sanitizer's _exit).
  real = dlsym_of_libc ? dlsym_of_libc(RTLD_NEXT, kNames[static_cast<int>(fn)]) : nullptr;
  if (real) g_real[static_cast<int>(fn)].store(real, std::memory_order_release);
  return real;
}

__attribute__((constructor)) void resolve_all() {
  for (int i = 0; i < static_cast<int>(Fn::Count); ++i) resolve(static_cast<Fn>(i));
}

template <typename F>
F real(Fn fn) {
  return reinterpret_cast<F>(resolve(fn));
}

[[noreturn]] void end_now(Fn fn, int status) {
  gmt::recorder::flush_before_image_ends(kFlushTimeoutMs);
  if (auto f = real<void (*)(int)>(fn)) f(status);
  for (;;) syscall(SYS_exit_group, status);  // what glibc's _exit does
}

// The exec family: flushed and marked complete before; an exec that returns failed, and the process goes on.
template <typename Call>
int exec_with_flush(Call&& call) {
  gmt::recorder::flush_before_image_ends(kFlushTimeoutMs);
  int result = call();
  int saved_errno = errno;
  gmt::recorder::image_continues_after_failed_exec();
  errno = saved_errno;
  return result;
}

using ExecveFn = int (*)(const char*, char* const[], char* const[]);
using ExecvFn = int (*)(const char*, char* const[]);
using FexecveFn = int (*)(int, char* const[], char* const[]);

int missing() {
  errno = ENOSYS;
  return -1;
}

}  // namespace

extern "C" {

[[noreturn]] void _exit(int status) { end_now(Fn::_exit, status); }
[[noreturn]] void _Exit(int status) noexcept { end_now(Fn::_Exit, status); }

int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  auto f = real<ExecveFn>(Fn::execve);
  return f ? exec_with_flush([&] { return f(path, argv, envp); }) : missing();
}

int execv(const char* path, char* const argv[]) noexcept {
  auto f = real<ExecvFn>(Fn::execv);
  return f ? exec_with_flush([&] { return f(path, argv); }) : missing();
}

int execvp(const char* file, char* const argv[]) noexcept {
  auto f = real<ExecvFn>(Fn::execvp);
  return f ? exec_with_flush([&] { return f(file, argv); }) : missing();
}

int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  auto f = real<ExecveFn>(Fn::execvpe);
  return f ? exec_with_flush([&] { return f(file, argv, envp); }) : missing();
}

int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  auto f = real<FexecveFn>(Fn::fexecve);
  return f ? exec_with_flush([&] { return f(fd, argv, envp); }) : missing();
}

}  // extern "C"

// execl, execlp and execle: their arguments on this stack as an argv, then the v form above (glibc's own
// execl calls its internal execve, which no hook sees).
namespace {

template <typename Then>
int with_argv(const char* arg, va_list args, bool takes_envp, Then&& then) {
  va_list count_args;
  va_copy(count_args, args);
  size_t count = 1;
  if (arg) {
    while (va_arg(count_args, const char*) != nullptr) ++count;
  }
  va_end(count_args);
  const char* argv[count + 1];  // NOLINT: a VLA, as glibc's execl: no allocation in a forked child
  argv[0] = arg;
  for (size_t i = 1; i < count; ++i) argv[i] = va_arg(args, const char*);
  argv[count] = nullptr;
  if (arg) (void)va_arg(args, const char*);  // the terminating null
  char* const* envp = takes_envp ? va_arg(args, char* const*) : nullptr;
  return then(const_cast<char* const*>(argv), envp);
}

}  // namespace

extern "C" {

int execl(const char* path, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  int result = with_argv(arg, args, false, [&](char* const* argv, char* const*) { return execv(path, argv); });
  va_end(args);
  return result;
}

int execlp(const char* file, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  int result = with_argv(arg, args, false, [&](char* const* argv, char* const*) { return execvp(file, argv); });
  va_end(args);
  return result;
}

int execle(const char* path, const char* arg, ...) noexcept {
  va_list args;
  va_start(args, arg);
  int result =
      with_argv(arg, args, true, [&](char* const* argv, char* const* envp) { return execve(path, argv, envp); });
  va_end(args);
  return result;
}

}  // extern "C"
