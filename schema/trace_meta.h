// The trace's meta table: its keys (namespace meta) and the values of meta.backend and meta.backend_reason, split from
// schema/trace_schema.h, which includes this file: facts about the process and the recording, written by the library
// (recorder/) and by the CLI, read by analysis/. docs/trace-format.md lists them with their meaning.
#pragma once

namespace gmt::schema {

// Keys of the meta table. Values are text; numbers are written in decimal.
namespace meta {
inline constexpr const char* kPid = "pid";
inline constexpr const char* kParentPid = "parent_pid";
inline constexpr const char* kCommandLine = "command_line";  // arguments joined by spaces
inline constexpr const char* kHostname = "hostname";
inline constexpr const char* kStartUnixNs = "start_unix_ns";
inline constexpr const char* kStartMonotonicNs = "start_monotonic_ns";
inline constexpr const char* kEndMonotonicNs = "end_monotonic_ns";  // written at a clean exit
inline constexpr const char* kComplete = "complete";                // "1" once the process exited cleanly
inline constexpr const char* kSimulated = "simulated";              // "1" under the simulated CUDA runtime
// v13, `run --sample-block-stacks SIZE` (recorder/block_stack_sample.h): blocks of at least SIZE bytes took their
// stack, smaller ones one per SIZE bytes allocated on average; a block allocation with stack 0 was not sampled.
// Absent: every block took its stack (when stacks were on).
inline constexpr const char* kBlockStackSampleBytes = "block_stack_sample_bytes";
inline constexpr const char* kBackend = "backend";           // "cupti", "hooks" or "runtime" (see Source)
inline constexpr const char* kBackendNote = "backend_note";  // why this backend: e.g. CUPTI refused
// Why this backend was chosen, one of backend_reasons below (v7). Absent in older traces.
inline constexpr const char* kBackendReason = "backend_reason";
// `run --verify` (v7): the second driver-level backend that recorded every event as well, under its own source
// ("cupti" or "hooks", as meta.backend), only to be matched against the counting backend's events. Its events are
// never counted: read `WHERE source != <its source>` for memory figures. Absent without --verify, and when the
// cross-check could not start (then verify_unavailable says why).
inline constexpr const char* kVerifyBackend = "verify_backend";
inline constexpr const char* kVerifyUnavailable = "verify_unavailable";
inline constexpr const char* kToolVersion = "gpumemtrace_version";
inline constexpr const char* kDroppedEvents = "dropped_events";  // events lost (should stay "0")
// Back-pressure (the app outran the writer; docs/benchmarks.md): how often an app thread waited for the writer
// to drain the recorder's buffers instead of dropping events, and for how long in total. Written with each
// batch once the first wait happened; absent when the app never waited.
inline constexpr const char* kBackpressureWaits = "backpressure_waits";
inline constexpr const char* kBackpressureWaitNs = "backpressure_wait_ns";
inline constexpr const char* kSymbolized = "symbolized";  // "1" once symbols are filled
// Multi-process jobs (docs/trace-format.md): written only when a launcher variable is set.
inline constexpr const char* kRank = "rank";               // global rank, as the launcher gave it
inline constexpr const char* kRankSource = "rank_source";  // the variable it came from, e.g. "RANK"
inline constexpr const char* kLocalRank = "local_rank";    // rank on this host
inline constexpr const char* kLocalRankSource = "local_rank_source";
inline constexpr const char* kWorldSize = "world_size";
// Device ordinals the process's events named, ascending, comma-separated ("0,1"); "" when none. Updated when
// a written batch names a new device and at a clean exit, so an incomplete trace has those it wrote.
inline constexpr const char* kDevices = "devices";
// "1": events.time_ns never decreases as events.id grows (the recorder keeps it so; traces without the key
// may have events recorded a little out of time order, by threads that stalled before taking the lock). It holds
// separately for the events of source TorchAllocator (tensor blocks, drained from PyTorch's history up to seconds
// after they happened) and for all other events: read each set on its own (WHERE source = 4 / != 4).
inline constexpr const char* kEventsTimeOrdered = "events_time_ordered";
// Why recording ended before the process did (the trace is then incomplete): "disk full: <SQLite's reason>",
// "write failed: <reason>", or, in the stand-in trace `run` writes, "killed by signal N (<name>) before
// recording started". Absent when recording ran to the end or the process died without a chance to say.
inline constexpr const char* kStopReason = "stop_reason";
// PyTorch's tensor blocks: "1" once the in-process package attached its tracker to PyTorch's caching allocator in
// this process (v7; in v6 traces: once it enabled PyTorch's memory history for `run --torch-blocks`); "0" when it
// could not (tensor_blocks_note says why). Absent: no PyTorch caching allocator was tracked.
inline constexpr const char* kTensorBlocks = "tensor_blocks";
// How many drains of PyTorch's history ring found that it had overwritten entries not drained yet (the app
// allocated faster than the drain kept up): tensor blocks were lost then (how many is unknown). "0": none lost.
inline constexpr const char* kTensorBlocksOverruns = "tensor_blocks_overruns";
// v7: "1" once PyTorch's trace tracker is attached in this process (tensor blocks recorded as they happen);
// "0" with tensor_blocks_note saying why it could not be (no compiler, another allocator backend, ...): the
// trace then has PyTorch's memory at the CUDA level only. Absent: no PyTorch caching allocator was used.
inline constexpr const char* kTensorBlocksNote = "tensor_blocks_note";
// v7: when the Python interpreter began to exit (its atexit handlers ran, CLOCK_MONOTONIC ns): tensor blocks are
// recorded up to then only, so the blocks alive at the end of the trace are those the app held when it exited,
// not what the interpreter's teardown released afterwards.
inline constexpr const char* kTensorBlocksEndNs = "tensor_blocks_end_ns";
// v10, with tensor blocks: PyTorch's allocator settings when the tracker was attached: the value of
// PYTORCH_ALLOC_CONF, else of PYTORCH_CUDA_ALLOC_CONF ("" when neither is set: the defaults), and which variable it
// came from (torch_alloc_conf_variable, absent when neither). Each later torch.cuda.memory._set_allocator_settings
// call is an AllocatorCall event whose handle n names meta torch_alloc_conf_<n>.
inline constexpr const char* kTorchAllocConf = "torch_alloc_conf";
inline constexpr const char* kTorchAllocConfVariable = "torch_alloc_conf_variable";
inline constexpr const char* kTorchAllocConfCallPrefix = "torch_alloc_conf_";
// v10: torch.__version__ and torch.version.git_version of the process.
inline constexpr const char* kTorchVersion = "torch_version";
inline constexpr const char* kTorchGitVersion = "torch_git_version";
// The benchmark control gmt_set_recording_paused (recorder/pause.cpp): how many times recording was paused and for
// how long in all (ns, pauses that ended). Events in those periods are missing from the trace: an allocation freed
// during a pause looks live. Absent when recording was never paused.
inline constexpr const char* kRecordingPauses = "recording_pauses";
inline constexpr const char* kRecordingPausedNs = "recording_paused_ns";
// Stack walks (unwind/fast_unwind.h): how many stacks were taken with libunwind because the fast walker gave up
// on them (a signal frame, code without unwind information, a foreign stack) or was turned off (GMT_UNWIND). Written
// at a clean exit, with stacks on. Under GMT_UNWIND=check also how many stacks both walkers took and on how many
// they disagreed (libunwind's stack is the one recorded).
inline constexpr const char* kStackWalksLibunwind = "stack_walks_libunwind";
inline constexpr const char* kStackWalksChecked = "stack_walks_checked";
inline constexpr const char* kStackWalkMismatches = "stack_walk_mismatches";
// The stack memo (recorder/stacks.h): stacks answered without walking them again (counted per thread by 64s), and
// under GMT_UNWIND=check how many of those were also taken in full and compared, on how many the two differed (the
// full stack is the one recorded), and the first differing pairs as "memo_id:full_id,..." (stacks.id). Written at
// a clean exit, with stacks on.
inline constexpr const char* kStackMemoHits = "stack_memo_hits";
// Stacks captured (counted per thread by 64s) and, among them, those a stored walk answered without walking
// (unwind/fast_unwind.cpp): the walk store's hit rate, beside stack_memo_hits. Absent before.
inline constexpr const char* kStackWalksCounted = "stack_walks_counted";
inline constexpr const char* kStackWalksStored = "stack_walks_stored";
// Among the stored answers, those checked only up to the first frame in CPython's eval loop (unwind/fast_unwind.h,
// StoredAnswer::kToTheCut): the stack memo then answered for the rest from the Python chain, or the stack was taken
// whole after all. Absent before.
inline constexpr const char* kStackWalksToTheCut = "stack_walks_to_the_cut";
// Stored walks checked word by word, whether they then matched or not (unwind/fast_unwind.h): about the stored
// answers where one stack pointer names one place, more where several places allocate at one depth. Counted per
// thread by 64 walks, as stack_walks_counted. Absent before 2026-12-07.
inline constexpr const char* kStackWalkWordChecks = "stack_walk_word_checks";
// Stored walks overwritten by another walk while still valid, their set of the store full (unwind/fast_unwind.h):
// each such place is walked afresh when it comes again. Near 0 where a thread's store holds every place it allocates
// from. Counted per thread by 64 walks, as stack_walks_counted. Absent before 2026-12-07's eight-way store.
inline constexpr const char* kStackWalksEvicted = "stack_walks_evicted";
// The id CPython gave our code watcher (3.12+, recorder/python_code_watch.cpp): while code objects are watched the
// stack memo keys Python frames by their code object's address and the count of code objects destroyed
// (unwind/python_frames.h). Absent where it was not registered (before 3.12, or in traces of earlier versions).
inline constexpr const char* kPythonCodeWatcher = "python_code_watcher";
inline constexpr const char* kStackMemoChecked = "stack_memo_checked";
inline constexpr const char* kStackMemoMismatches = "stack_memo_mismatches";
inline constexpr const char* kStackMemoMismatchExamples = "stack_memo_mismatch_examples";
// The recorder's own time on the app's threads (recorder/self_cost.h), at a clean exit: one event in 64 of each
// thread timed from its stack capture to its record's end; per kind of event, the events timed and their mean in
// ns. "cuda": CUDA-level events; "block": a framework's blocks (PyTorch's tensors, NVTX-memory-API regions).
// Absent for a kind with no event timed, and in traces before they existed.
inline constexpr const char* kSelfCostCudaEvents = "self_cost_cuda_events_timed";
inline constexpr const char* kSelfCostCudaNs = "self_cost_cuda_ns_per_event";
inline constexpr const char* kSelfCostBlockEvents = "self_cost_block_events_timed";
inline constexpr const char* kSelfCostBlockNs = "self_cost_block_ns_per_event";
// The same sample's block events whose stack the record took itself, phase by phase (recorder/self_cost.h's
// CostPhase): "walk=N,python_key=N,python_merge=N,stack_id=N,append=N", mean ns per event timed. Absent before.
inline constexpr const char* kSelfCostBlockPhases = "self_cost_block_phase_ns";
// The clock the library's times were read from (recorder/event_clock.h): "tsc" (the CPU's time-stamp counter,
// converted to CLOCK_MONOTONIC with a scale recalibrated every ~200 ms; within microseconds of it) or
// "clock_gettime" (CLOCK_MONOTONIC itself). Either way the times are CLOCK_MONOTONIC ns. Absent in traces
// before it existed, which used clock_gettime.
inline constexpr const char* kEventClock = "event_clock";
// v8: how the process `run` started ended, written by `run` into that process's trace after it ended (other
// processes of the run are not `run`'s children: their traces have neither). app_exit_status: its exit code
// (0-255) when it exited; app_exit_signal: the signal number that killed it. Exactly one is present.
inline constexpr const char* kAppExitStatus = "app_exit_status";
inline constexpr const char* kAppExitSignal = "app_exit_signal";
// v8, with them: how many events that process recorded never reached its trace (still in its buffers or in the
// writer's unfinished transaction when it ended: a SIGKILL, the OOM killer), from the counters it kept in a file
// of `run`'s (schema/event_counters.h). Absent when they are not known (other processes, traces made without run).
inline constexpr const char* kEventsLostAtExit = "events_lost_at_exit";
// v8, with them (absent where events_lost_at_exit is): events that came after the trace was closed at exit, and the
// frees among them: a library finalized after ours (a static object's destructor in a library the app linked)
// freeing its memory. Those frees are not in the trace, so as many allocations may show as leaked that were not.
inline constexpr const char* kEventsAfterClose = "events_after_close";
inline constexpr const char* kFreesAfterClose = "frees_after_close";
}  // namespace meta

// The values of meta.backend (one name per Source), written by the library and by the CLI.
namespace backend_names {
inline constexpr const char* kRuntime = "runtime";
inline constexpr const char* kCupti = "cupti";
inline constexpr const char* kHooks = "hooks";
}  // namespace backend_names

// The values of meta.backend_reason (v7): why meta.backend is the one that counted (recorder/backend_choice.h).
namespace backend_reasons {
inline constexpr const char* kRequested = "requested";   // --backend named it (and it could be had)
inline constexpr const char* kHooksBind = "hooks_bind";  // auto: the driver hooks bind in this process (the default)
// auto: the driver hooks cannot see this process's allocations (backend_note says why): CUPTI counts.
inline constexpr const char* kHooksCannotBind = "hooks_cannot_bind";
// CUPTI was asked for (--backend cupti) but cannot be had (another tool holds it, or it cannot load): the hooks.
inline constexpr const char* kCuptiUnavailable = "cupti_unavailable";
// auto: the hooks cannot bind and CUPTI cannot be had either: the hooks count, and allocations may be missing.
inline constexpr const char* kNeitherBinds = "hooks_cannot_bind_cupti_unavailable";
inline constexpr const char* kNoDriver = "no_driver";   // no CUDA driver in this process: runtime
inline constexpr const char* kSimulated = "simulated";  // the simulated CUDA runtime: runtime
}  // namespace backend_reasons

}  // namespace gmt::schema
