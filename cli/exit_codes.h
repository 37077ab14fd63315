// Exit codes of the gpumemtrace CLI (README.md, "Exit codes", lists them for users).
// `report`, `diff` and `symbolize` use the small codes below. `run` passes the app's own exit status through
// (128 + N when signal N killed it, as a shell reports it); its own failures before the app starts follow
// env(1) and timeout(1), so that they cannot be taken for the app's: 125 for gpumemtrace's own failure (a bad
// option, an existing or unwritable trace path, a missing part of the install), 126 when the app cannot be
// executed, 127 when it is not found.
#pragma once

namespace gmt::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;  // a gate (--fail-on-leak, ...) failed
inline constexpr int kExitBadInput = 2;  // bad options, missing/unreadable/foreign/newer trace files
inline constexpr int kExitInternal = 3;  // a bug or an environment problem in gpumemtrace itself
// A gate was asked for a verdict on a trace that cannot give one: it is incomplete (the process crashed or was
// killed, recording stopped early) or events were lost, so "no leak" would be a guess. --allow-incomplete
// judges what the trace holds instead.
inline constexpr int kExitIncompleteTrace = 4;
// `whatif`: the trace cannot be replayed, one code per reason: no tensor blocks were recorded (5), allocator events
// were lost while recording (6), PyTorch ran its cudaMallocAsync backend, whose driver pool has no policy to replay
// (7).
inline constexpr int kExitNoTensorBlocks = 5;
inline constexpr int kExitLostBlockEvents = 6;
inline constexpr int kExitCudaMallocAsync = 7;
// `ctl`: no such process, or it records nothing that can be controlled (not under `run`, exited, no trace yet).
inline constexpr int kExitCtlNotRunning = 8;
// `ctl`: the process belongs to another user.
inline constexpr int kExitCtlRefused = 9;
// `whatif`: the trace's torch is not a release the replayed policy was checked for (or is not named);
// --force-torch-version replays it anyway.
inline constexpr int kExitUncheckedTorchVersion = 10;
inline constexpr int kExitRunFailed = 125;  // `run`: gpumemtrace failed before the app started
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitAppNotFound = 127;

}  // namespace gmt::cli
