#include "recorder/fatal_signals.h"

#include <dlfcn.h>
#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "recorder/recorder.h"
#include "schema/environment.h"

namespace gmt::recorder {
namespace {

// How long a dying thread waits for the writer to flush. A normal flush takes milliseconds (at most the
// 200 ms of events since the last batch); the bound matters only when the writer is stuck, e.g. on a malloc
// arena lock that the crashing thread held: then the app dies unflushed after this long, never hangs.
constexpr int kFlushTimeoutMs = 2000;

// Signals raised by the faulting instruction itself: returning from the handler re-runs the instruction,
// which faults again under the restored disposition, with the kernel's own siginfo (fault address, core).
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
// Requests to terminate: ours only when the app has none (SIG_DFL).
constexpr int kTerminationSignals[] = {SIGTERM, SIGHUP};

struct sigaction g_previous[NSIG];  // the disposition ours replaced, restored before the signal goes on

bool is_fault_signal(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

void on_fatal_signal(int sig, siginfo_t* info, void* /*context*/) {
  int saved_errno = errno;
  flush_from_signal_handler(kFlushTimeoutMs);  // best effort; async-signal-safe (recorder.h)
  // From here on the signal is the previous owner's: SIG_DFL kills as it would have without us, a chained
  // handler runs as it would have. Ours is gone for this signal (a flush is needed once).
  sigaction(sig, &g_previous[sig], nullptr);
  errno = saved_errno;
  // A kernel-raised fault (si_code > 0: SEGV_MAPERR, FPE_INTDIV, ... and SI_KERNEL) comes back by itself when
  // we return. Anything sent (kill, raise, abort, tgkill: si_code <= 0) or not a fault is sent again: it stays
  // pending while the handler runs (the signal is blocked in it) and is delivered as we return.
  bool refaults = is_fault_signal(sig) && info != nullptr && info->si_code > 0;
  if (!refaults) raise(sig);
}

void install(int sig, bool only_over_default) {
  struct sigaction previous {};
  if (sigaction(sig, nullptr, &previous) != 0) return;
  bool is_default = !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_DFL;
  bool is_ignored = !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN;
  if (is_ignored) return;  // not fatal: nothing to flush for
  if (only_over_default && !is_default) return;
  g_previous[sig] = previous;
  struct sigaction ours {};
  ours.sa_sigaction = on_fatal_signal;
  // SA_ONSTACK: on a thread with an alternate signal stack (the app's), a stack overflow still reaches us;
  // without one the kernel kills the process directly, unflushed. The termination signals are blocked while
  // ours runs, so that a second one does not interrupt the flush.
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&ours.sa_mask);
  for (int s : kTerminationSignals) sigaddset(&ours.sa_mask, s);
  sigaddset(&ours.sa_mask, SIGINT);
  sigaction(sig, &ours, nullptr);
}

// A Python interpreter shows a C handler found at its startup as None in signal.getsignal() instead of
// SIG_DFL, and `signal.signal(SIGTERM, signal.getsignal(SIGTERM))`, a common way to restore a handler, then
// raises TypeError. Training scripts do that with SIGTERM (checkpoint on preemption); Python code rarely
// touches the crash signals (faulthandler chains in C). So in Python, SIGTERM and SIGHUP stay the app's.
bool is_python_interpreter() { return dlsym(RTLD_DEFAULT, "Py_GetVersion") != nullptr; }

}  // namespace

void install_fatal_signal_handlers() {
  if (const char* v = getenv(schema::env::kSignalFlush); v && std::strcmp(v, "0") == 0) return;
  for (int sig : kCrashSignals) install(sig, /*only_over_default=*/false);
  if (is_python_interpreter()) return;
  for (int sig : kTerminationSignals) install(sig, /*only_over_default=*/true);
}

}  // namespace gmt::recorder
