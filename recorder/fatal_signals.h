// Flush on fatal signals: when the app is about to die of SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM or
// SIGHUP, write what is buffered (at most the last 200 ms of events) before it dies, then let it die exactly
// as it would have: same signal, same core dump, same exit status. docs/reliability.md says what is safe.
#pragma once

namespace gmt::recorder {

// Called once, at library load, unless GMT_SIGNAL_FLUSH is "0" (schema/environment.h). Installs a handler for
// each of the signals above whose disposition is
//   - SIG_DFL: ours flushes, restores SIG_DFL and lets the signal kill the process;
//   - a handler (another preloaded library's, or the app's when we are loaded late): only for the crash
//     signals (SEGV, BUS, ABRT, FPE, ILL); ours flushes, restores that handler and hands the signal to it;
//   - SIG_IGN: left alone (the signal is not fatal).
// SIGTERM and SIGHUP get ours only when they are SIG_DFL, and not in a Python interpreter (where
// signal.getsignal() would show None instead of SIG_DFL, and restoring that value raises TypeError). SIGINT
// never does: Python installs its KeyboardInterrupt handler only when SIGINT is SIG_DFL at startup. A handler
// the app installs later simply replaces ours; we never reinstall.
void install_fatal_signal_handlers();

}  // namespace gmt::recorder
