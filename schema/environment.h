// Every GMT_* environment variable, by name: the second contract between the two sides, after the trace's tables.
// `gpumemtrace run` (cli/) sets them for the app; the preload library (recorder/, interpose/, cupti/, nvtx/), the
// in-process Python package (python/) and the simulated runtime (tests/simcuda/) read them. Nothing else spells a
// GMT_* name. docs/trace-format.md and `gpumemtrace run --help` document what users may set by hand.
//
// The Python package reads this list from python/gpumemtrace_inprocess/environment.py, which
// schema/environment_to_python.cmake generates from this file (kTorchBlocks -> TORCH_BLOCKS); the build fails when
// the two differ. Keep the one form the generator reads: `inline constexpr const char* kName = "GMT_NAME";`, one
// per line.
#pragma once

namespace gmt::schema::env {

// ---- set by `gpumemtrace run`, read by the preload library ----------------------------------------------------

// The trace path pattern: %p pid, %r rank, %d local GPU, %h host, %% (schema/trace_naming.h).
inline constexpr const char* kOutput = "GMT_OUTPUT";
// The pid of the process `run` started: any other process (a forked or exec'ed child) gets its own trace name.
inline constexpr const char* kRootPid = "GMT_ROOT_PID";
// A file where every traced process appends its trace's path, so that `run` finds them all after the run.
inline constexpr const char* kRegistry = "GMT_REGISTRY";
// A 64 KiB file the process `run` started maps shared and counts its events into (schema/event_counters.h), so that
// after a SIGKILL `run` can say how many recorded events never reached the trace. Other processes ignore it.
inline constexpr const char* kEventCounters = "GMT_EVENT_COUNTERS";
// "1": record events without call stacks.
inline constexpr const char* kNoStacks = "GMT_NO_STACKS";
// "1": frees take call stacks too. Off by default: the analysis never uses a free's stack (leaks, peaks and growth
// are attributed to the allocating stack), and the walk is the costliest part of recording an event.
inline constexpr const char* kFreeStacks = "GMT_FREE_STACKS";
// "1": the CLI put the simulated runtime first (`run --simulate`).
inline constexpr const char* kSimulated = "GMT_SIMULATED";
// How stacks are walked (unwind/fast_unwind.h): "fast" (the default: the CFI-rule walker, libunwind where it gives
// up), "libunwind" (libunwind only: the behaviour before the fast walker, for comparisons), "check" (both on every
// stack, disagreements counted in the trace; slow, for verification).
inline constexpr const char* kUnwind = "GMT_UNWIND";
// Which capture path counts (recorder/backend.h): "auto" (the default), "cupti", "hooks" or "runtime".
inline constexpr const char* kBackend = "GMT_BACKEND";
// The full path of libcupti for the CUPTI backend (cupti/cupti_loader.h); `run` finds the toolkit's, or passes on
// the user's.
inline constexpr const char* kCuptiLibrary = "GMT_CUPTI_LIBRARY";
// The NVTX injection library that NVTX_INJECTION64_PATH named before `run` pointed it at us (e.g. Nsight
// Systems): loaded and initialized by us, for every NVTX copy, and handed every call (nvtx/, chaining).
inline constexpr const char* kNvtxChain = "GMT_NVTX_CHAIN";
// "1": emit gpumemtrace's own markers and ranges in the NVTX domain "gpumemtrace" (run --nvtx-emit).
inline constexpr const char* kNvtxEmit = "GMT_NVTX_EMIT";
// Bytes: a marker each time live bytes pass a new multiple of this (run --nvtx-peak-step; 0: none).
inline constexpr const char* kNvtxPeakStep = "GMT_NVTX_PEAK_STEP";
// "1" (`run --verify`): both driver-level backends record every event, for the cross-check (recorder/backend.h).
inline constexpr const char* kVerify = "GMT_VERIFY";
// "1" (`run --aggregate`): a bounded trace (recorder/aggregator.h, docs/trace-format.md "Aggregate traces").
inline constexpr const char* kAggregate = "GMT_AGGREGATE";
// "1" (`run --paused`): start with recording paused; the control channel opens at the first CUDA call, and
// `gpumemtrace ctl ... resume` starts recording (recorder/pause.cpp).
inline constexpr const char* kStartPaused = "GMT_START_PAUSED";

// ---- set by `gpumemtrace run`, read by the in-process Python package ------------------------------------------

// The preload library's path: the package reaches it with ctypes (python/gpumemtrace_inprocess/native.py).
inline constexpr const char* kLibrary = "GMT_LIBRARY";
// "1": python/sitecustomize.py starts the package (`run` sets "0" with --no-python-hooks).
inline constexpr const char* kPythonHooks = "GMT_PYTHON_HOOKS";
// "0": do not track PyTorch's tensors (`run --no-torch-blocks`; python/gpumemtrace_inprocess/torch_tracker.py).
inline constexpr const char* kTorchBlocks = "GMT_TORCH_BLOCKS";

// ---- read only, for users and tests that set them by hand ------------------------------------------------------

// "monotonic": time events with clock_gettime(CLOCK_MONOTONIC) even where the TSC could be used
// (recorder/event_clock.h); "tsc", the default, uses it where the kernel's clock is the TSC.
inline constexpr const char* kEventClock = "GMT_EVENT_CLOCK";
// "0": no fatal-signal handler at all (recorder/fatal_signals.h): the app's dispositions stay untouched, and a crash
// loses up to the last 200 ms of events.
inline constexpr const char* kSignalFlush = "GMT_SIGNAL_FLUSH";
// "0": no stack memo (recorder/stacks.h): every stack is walked, merged with its Python frames and hashed, as
// before the memo existed. For comparisons: the stacks recorded are the same either way.
inline constexpr const char* kStackMemo = "GMT_STACK_MEMO";
// "1": the cut at CPython's eval loop (recorder/stacks.cpp): a stack taken again is checked only up to its first
// eval-loop frame before the memo answers. Off by default: not shown to pay (docs/benchmarks.md, 2026-12-07).
inline constexpr const char* kStackCut = "GMT_STACK_CUT";
// "0": the in-process package registers no code watcher (python/gpumemtrace_inprocess/code_watch.py): the stack memo
// keys Python frames by reading their code objects, as before 3.12. For comparisons.
inline constexpr const char* kCodeWatch = "GMT_CODE_WATCH";
// "python": a framework's blocks (PyTorch's tensors) allocated by a thread running Python take its Python frames only,
// no native walk (recorder/stacks.h, capture_python_only_stack). Off by default: an experiment for issue 33's cost
// (the walk is the largest part of a block event's time); it drops the native frames between the Python line and
// the allocator from those stacks. Not under GMT_UNWIND=check, which compares whole stacks.
inline constexpr const char* kBlockStacks = "GMT_BLOCK_STACKS";
// A size in bytes (run --sample-block-stacks): a framework's blocks (PyTorch's tensors, CuPy's arrays) of at least
// that size take their stack, smaller ones one per that many bytes allocated on average
// (recorder/block_stack_sample.h); the others are recorded without one. Unset or 0: every block takes its stack (the
// default).
inline constexpr const char* kBlockStackSample = "GMT_BLOCK_STACK_SAMPLE";
// "1": native stacks only, no Python frames (unwind/python_frames.h).
inline constexpr const char* kNoPythonFrames = "GMT_NO_PYTHON_FRAMES";
// "1": keep CUPTI's runtime-API callbacks on throughout (cupti/runtime_naming.h: the old behaviour, for comparisons).
inline constexpr const char* kCuptiRuntimeCallbacks = "GMT_CUPTI_RUNTIME_CALLBACKS";
// "1": a stderr line at each switch of those callbacks.
inline constexpr const char* kDebugCuptiNaming = "GMT_DEBUG_CUPTI_NAMING";
// "1": a stderr line per driver entry point handed out or refused (interpose/driver_hook_table.h).
inline constexpr const char* kDebugDriverHooks = "GMT_DEBUG_DRIVER_HOOKS";
// Milliseconds between cadence samples of a framework allocator's statistics (default 100; "0": none)
// (python/gpumemtrace_inprocess/allocator_stats.py).
inline constexpr const char* kAllocatorSampleMs = "GMT_ALLOCATOR_SAMPLE_MS";
// Milliseconds: the first window of an aggregate trace (default 1000; it doubles as the run goes on). For tests that
// need many windows in a short run (recorder/aggregator.h).
inline constexpr const char* kAggregateWindowMs = "GMT_AGGREGATE_WINDOW_MS";
// Where the PyTorch bridge is built and found, one file per torch build
// (python/gpumemtrace_inprocess/torch_tracker.py).
inline constexpr const char* kTorchBridgeCache = "GMT_TORCH_BRIDGE_CACHE";

// ---- the simulated CUDA runtime (tests/simcuda/README.md) ------------------------------------------------------

// "1": no banner on stderr (`run --simulate` says it once itself).
inline constexpr const char* kSimQuiet = "GMT_SIM_QUIET";
// The number of simulated devices (default 1; 0: calls return cudaErrorNoDevice).
inline constexpr const char* kSimDeviceCount = "GMT_SIM_DEVICE_COUNT";
// Each device's capacity: bytes, or with a K/M/G/T suffix (default 16 GiB).
inline constexpr const char* kSimDeviceBytes = "GMT_SIM_DEVICE_BYTES";

}  // namespace gmt::schema::env
