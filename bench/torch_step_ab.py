#!/usr/bin/env python3
"""What the profiler costs a real PyTorch step, measured inside one process: recording switched on and off in
alternating blocks of steps (gmt_set_recording_paused, recorder/pause.cpp), so that both arms run in the same
process, on the same GPU clocks and memory placement. Separate processes of the same program differ by 10-30%
in step time on these machines (bench/torch_step.py, docs/benchmarks.md), which hides a 0.5% cost; blocks of
one process do not.

Arms: "on" is the profiler as it runs by default (every hook recording with stacks, Python frames, NVTX
capture, the allocator sampler, PyTorch's tensor blocks); "off" is the same process with every hook passing its
call through (one relaxed load per hook) and the sampler idle. Configuration "blocks" keeps the CUDA level
recording throughout and switches only the tensor blocks (gmt_set_torch_blocks_paused): block tracking's own
cost; "cuda" runs with --no-torch-blocks and switches everything: the CUDA level's cost alone. What "off" still pays: CUPTI's dispatch of the callbacks that are
subscribed, and our NVTX handler's early return: below a microsecond per call, a few calls per step. Blocks run
in ABBA order (on, off, off, on, ...) so that a linear drift cancels; each block starts with one untimed step;
a block's figure is its median step; the cost is taken over the adjacent (on, off) pairs: the median of the
per-pair ratios, and the mean with its 95% interval (1.96 standard errors).

Peers and control in the same table: PyTorch's own recorder toggled the same way in a raw process
(torch.cuda.memory._record_memory_history on / off, with stacks="python": the setting that names the Python line,
as block tracking does), and an A/A control (a raw process whose arms are identical:
the method's own noise floor).

`top` (issue 36): the profiler records throughout, and a `gpumemtrace top --interval 1` reading this process's
trace runs beside it, on any of the machine's cores, stopped (SIGSTOP) in the off-blocks and continued in the on-
blocks: what watching a service costs it, on a full trace and on an aggregate one (`run --aggregate`).

Besides the step, the host's part of it (from the step's start until the host has issued its work and waits for
the GPU), median per arm: the step waits on the host when that part outgrows the GPU's time, and then every
microsecond of hook work shows in the step; while it stays below, the GPU hides it.

Events per step (the `events/step` column, and the "stated / measured" lines under a configuration): the events
recorded inside a timed on-block step's NVTX range; for the `blocks*` configurations the tensor block events alone
(their on blocks are the steps whose ranges hold any), so that their line is issue 33's per block event figure:
(host on - host off) / block events per step, against what the trace states of its own time per tensor event.

CUDA calls per step (issue 33 part 4): the control process counts its step's kernel launches and CUDA API calls
with PyTorch's profiler after all its timed blocks; each cupti configuration's line divides its added host time by them,
against bench/launch_cost.py's per-launch figure (CUPTI's dispatch on every driver call once one driver-API
callback is enabled).

Usage:
  bench/torch_step_ab.py BUILD_DIR [--blocks N=40] [--block-steps K=10] [--batch B=64] [--configs a,b,...]
      configs: control, hooks, blocks, cuda, cupti, cupti-cuda, recorder, hooks-cut, blocks-cut,
               hooks-nowatch, hooks-writer-apart, hooks-python, blocks-python, top, top-aggregate
               (default: all)
  bench/torch_step_ab.py --worker MODE [--blocks N] [--block-steps K] [--batch B]   one process: one JSON line
"""
import ctypes
import json
import math
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import build_steps, events_per_train_step, pin_to_cores, run_config  # noqa: E402

WARM_UP_STEPS = 20
ALL_CORES = os.sched_getaffinity(0)  # before the worker pins itself (pin_to_cores): for the `top` beside it


def switch_for(mode, torch):
    """A function that turns the measured work on (True) or off (False) in this process."""
    if mode in ("gpumemtrace", "blocks"):
        library = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
        set_paused = library.gmt_set_recording_paused if mode == "gpumemtrace" else library.gmt_set_torch_blocks_paused
        set_paused.argtypes, set_paused.restype = [ctypes.c_int], ctypes.c_int
        return lambda on: set_paused(0 if on else 1)
    if mode == "recorder":
        record = torch.cuda.memory._record_memory_history
        return lambda on: record("all" if on else None, stacks="python", max_entries=100000)
    if mode == "control":
        return lambda on: None
    if mode == "top":
        return top_switch()
    raise SystemExit(f"unknown worker mode {mode!r} (gpumemtrace, blocks, recorder, control, top)")


def top_switch():
    """`gpumemtrace top --interval 1` reading this process's trace while it runs, as a user would watch a
    service: a process of its own, free to run on any of the machine's cores (not pinned to the worker's), frames
    to /dev/null. "Off" stops it (SIGSTOP) and "on" continues it (SIGCONT): a top stopped past its interval
    refreshes at once when continued, so the on-blocks see at least its usual work (a bound from above)."""
    import signal

    cores = os.sched_getaffinity(0)
    top = subprocess.Popen([os.environ["GMT_TOP_CLI"], "top", "--interval", "1", str(os.getpid())],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           preexec_fn=lambda: os.sched_setaffinity(0, ALL_CORES or cores))

    def switch(on):
        if top.poll() is not None:
            raise SystemExit(f"top ended early ({top.returncode}): {top.stderr.read().decode()[-2000:]}")
        os.kill(top.pid, signal.SIGCONT if on else signal.SIGSTOP)
    return switch


def paired_costs(on_blocks, off_blocks):
    """Per adjacent (on, off) pair, the relative cost on/off - 1, in percent."""
    return [100.0 * (on / off - 1.0) for on, off in zip(on_blocks, off_blocks)]


def summary(costs):
    mean = statistics.fmean(costs)
    half_width = 1.96 * statistics.stdev(costs) / math.sqrt(len(costs)) if len(costs) > 1 else float("nan")
    return {"median": statistics.median(costs), "mean": mean, "ci95": half_width, "pairs": len(costs)}


def thread_cpu_ns():
    """CPU time (ns, /proc's schedstat) of every thread of this process, by thread id: (name, ns)."""
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as stat, open(f"/proc/self/task/{tid}/comm") as comm:
                threads[tid] = (comm.read().strip(), int(stat.read().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return threads


def thread_group(tid, name, main_tid):
    """Whose CPU a thread's is: the app's main thread, our writer, or the process's other threads (PyTorch's
    autograd worker, its pools, our sampler)."""
    if tid == main_tid:
        return "main"
    return "writer" if name == "gmt-writer" else "other"


def add_cpu(totals, before, after, main_tid):
    for tid, (name, ns) in after.items():
        group = thread_group(tid, name, main_tid)
        totals[group] = totals.get(group, 0) + ns - before.get(tid, (name, 0))[1]


def move_writer_apart():
    """Config "hooks-writer-apart": our writer thread moved to the machine's cores outside the worker's pinned ones,
    so that it no longer shares the app's cores: how much of the step's cost is the writer's competition for them
    rather than the hooks' own work on the app's threads. Returns the cores it was given (empty: not moved)."""
    apart = ALL_CORES - os.sched_getaffinity(0)
    writers = [tid for tid, (name, _) in thread_cpu_ns().items() if name == "gmt-writer"] if apart else []
    for tid in writers:
        os.sched_setaffinity(int(tid), apart)
    return apart if writers else set()


def worker(mode, blocks, block_steps, batch):
    pin_to_cores()
    import torch

    host_done = []  # each step's time when the host had issued its work (before it waits for the GPU)
    train_step, infer_step = build_steps(batch, host_done)
    switch = switch_for(mode, torch)
    result = {"mode": mode, "blocks": blocks, "block_steps": block_steps}
    for name, step in (("train", train_step), ("infer", infer_step)):
        for _ in range(WARM_UP_STEPS):
            step()
        if os.environ.get("GMT_BENCH_WRITER_APART") == "1":
            apart = move_writer_apart()
            if not apart:
                raise SystemExit("hooks-writer-apart: no gmt-writer thread, or no core outside the pinned ones")
            result["writer_cores"] = sorted(apart)
        on_blocks, off_blocks = [], []
        host_on, host_off = [], []  # the same for the host's part of the step
        cpu_on, cpu_off = {}, {}  # CPU ns by thread group (thread_group), summed over each arm's timed steps
        main_tid = str(threading.get_native_id())
        for block in range(blocks):
            on = recording_on_in(block)
            switch(on)
            step()  # untimed: whatever switching itself costs is not in the block
            times, host_times = [], []
            cpu_before = thread_cpu_ns()
            for _ in range(block_steps):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
                host_times.append(host_done[-1] - start)
            add_cpu(cpu_on if on else cpu_off, cpu_before, thread_cpu_ns(), main_tid)
            (on_blocks if on else off_blocks).append(statistics.median(times) * 1e3)
            (host_on if on else host_off).append(statistics.median(host_times) * 1e3)
        switch(True)
        result[name] = summary(paired_costs(on_blocks, off_blocks))
        result[name]["off_ms"] = statistics.median(off_blocks)
        # The host's part: when it grows past the GPU's time, the step waits on the host and every microsecond
        # of hook work shows in the step; while it stays below, the GPU hides it.
        result[name]["host_off_ms"] = statistics.median(host_off)
        result[name]["host_on_ms"] = statistics.median(host_on)
        # CPU per step of each thread group, per arm: where the host time goes (the writer and the app's threads
        # share the process's cores).
        steps_per_arm = block_steps * (blocks // 2)
        for arm, cpu in (("on", cpu_on), ("off", cpu_off)):
            result[name][f"cpu_{arm}_ms"] = {group: ns / 1e6 / steps_per_arm for group, ns in sorted(cpu.items())}
    if mode == "control":  # after every timed block: the profiler (CUPTI) stays loaded once started
        for name, step in (("train", train_step), ("infer", infer_step)):
            result[name].update(cuda_calls_per_step(step))
    print(json.dumps(result), flush=True)


def cuda_calls_per_step(step, steps=4):
    """The step's kernel launches and CUDA API calls (runtime and driver), counted by PyTorch's profiler (Kineto,
    through CUPTI) in the raw control process: what the cupti backend's dispatch is paid on. Once any driver-API
    callback is enabled, CUPTI adds its dispatch to every driver call, ours or not (bench/launch_cost.py). {} when
    the profiler cannot count (no CUPTI, or its start fails)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            for _ in range(steps):
                step()
        api_calls = launches = 0
        for event in profiler.key_averages():
            if re.match(r"cu(da)?[A-Z]", event.key):  # cudaLaunchKernel, cudaMemcpyAsync, cuLaunchKernel, ...
                api_calls += event.count
                launches += event.count if "Launch" in event.key else 0
        return {"launches_per_step": launches / steps, "cuda_calls_per_step": api_calls / steps}
    except Exception as error:  # a count is a side figure: the step's measurement stands without it
        print(f"cannot count the step's CUDA calls: {error!r}", file=sys.stderr)
        return {}


def recording_on_in(block):
    return block % 4 in (0, 3)  # ABBA: on, off, off, on, on, off, ...


def expected_pauses(blocks):
    """Pauses per process: one at each switch from on to off (each phase starts on), in both phases."""
    per_phase = sum(1 for block in range(blocks)
                    if not recording_on_in(block) and (block == 0 or recording_on_in(block - 1)))
    return 2 * per_phase


def check_pauses(trace, blocks):
    """The trace must count exactly the pauses the worker made."""
    import sqlite3

    with sqlite3.connect(trace) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    expected = expected_pauses(blocks)
    if meta.get("recording_pauses") != str(expected):
        raise SystemExit(f"{trace}: meta.recording_pauses = {meta.get('recording_pauses')}, expected {expected}")


def self_cost_note(trace):
    """The recorder's own time per event as the trace states it (recorder/self_cost.h), if it does."""
    if not os.path.exists(trace):
        return ""
    with sqlite3.connect(trace) as db:
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key LIKE 'self_cost_%' OR key LIKE 'stack_%' "
                               "OR key IN ('python_code_watcher', 'block_stack_sample_bytes')").fetchall())
        sampled = None
        if "block_stack_sample_bytes" in meta:  # run --sample-block-stacks: the tensor allocations that took a stack
            sampled = db.execute("SELECT count(*), sum(stack_id != 0) FROM events WHERE source = 4 AND kind = 1"
                                 ).fetchone()
    parts = [f"{kind} {meta[f'self_cost_{kind}_ns_per_event']} ns/event ({meta[f'self_cost_{kind}_events_timed']} timed)"
             for kind in ("cuda", "block") if f"self_cost_{kind}_ns_per_event" in meta]
    if "stack_walks_counted" in meta:  # how often the walk store and the stack memo answered (recorder/stacks.h)
        parts.append(f"stacks {meta['stack_walks_counted']}, stored walks {meta['stack_walks_stored']}, "
                     f"memo {meta.get('stack_memo_hits')}, to the cut {meta.get('stack_walks_to_the_cut', '-')}, "
                     f"stored walks checked {meta.get('stack_walk_word_checks', '-')}, "
                     f"evicted {meta.get('stack_walks_evicted', '-')}, "
                     f"code watcher {'on' if 'python_code_watcher' in meta else 'off'}")
    if sampled:
        parts.append(f"stacks sampled per {int(meta['block_stack_sample_bytes']) >> 20} MiB: {sampled[1] or 0} of "
                     f"{sampled[0]} tensor allocations took one")
    if "self_cost_block_phase_ns" in meta:  # where a block event's time goes (recorder/self_cost.h's CostPhase)
        parts.append(f"block phases {meta['self_cost_block_phase_ns']} ns")
    return "; recorder's own time: " + ", ".join(parts) if parts else ""


def stated_against_measured(trace, phase, measured_phase, events_per_step):
    """What the trace states of the recorder's own time per tensor event (recorder/self_cost.h) against the step's
    added host time per recorded event (issue 33 part 5: within 30%), for `phase` ("train", "inference")."""
    with sqlite3.connect(trace) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'self_cost_block_ns_per_event'").fetchone()
    measured = (measured_phase["host_on_ms"] - measured_phase["host_off_ms"]) * 1e6 / events_per_step
    head = f"{phase}: {events_per_step:.0f} events per step, host {measured:+.0f} ns per recorded event"
    if row is None:
        return f"{head}; the trace states no cost per tensor event"
    stated = float(row[0])
    ratio = f"{stated / measured:.2f}" if measured > 0 else "-"
    return f"{head}; the trace states {stated:.0f} ns per tensor event: stated / measured {ratio}"


def per_cuda_call(phase, counted, measured_phase):
    """The step's added host time per kernel launch and per CUDA call (counted in the control process): the
    cupti backend's cost against bench/launch_cost.py's per-launch figure."""
    added_ns = (measured_phase["host_on_ms"] - measured_phase["host_off_ms"]) * 1e6
    launches, calls = counted["launches_per_step"], counted["cuda_calls_per_step"]
    per_launch = f"{added_ns / launches:+.0f}" if launches else "-"
    per_call = f"{added_ns / calls:+.0f}" if calls else "-"
    return (f"{phase}: {launches:.0f} kernel launches and {calls:.0f} CUDA API calls per step (counted in the "
            f"control); host {added_ns / 1e3:+.1f} us per step: {per_launch} ns per launch, {per_call} ns per call")


def option(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def main():
    args = sys.argv[1:]
    blocks = option(args, "--blocks", 40)
    block_steps = option(args, "--block-steps", 10)
    batch = option(args, "--batch", 64)
    if "--worker" in args:
        worker(args[args.index("--worker") + 1], blocks, block_steps, batch)
        return
    if not args or args[0].startswith("--"):
        raise SystemExit(__doc__)
    cli = os.path.join(args[0], "bin", "gpumemtrace")
    me = [sys.executable, os.path.abspath(__file__), "--blocks", str(blocks), "--block-steps", str(block_steps),
          "--batch", str(batch), "--worker"]

    def hooks_run(trace, mode, *options):
        return [cli, "run", "-q", "--no-symbolize", "--backend", "hooks", *options, "-o", trace, "--", *me, mode]

    def cupti_run(trace, *options):
        return [cli, "run", "-q", "--no-symbolize", "--backend", "cupti", *options, "-o", trace, "--", *me,
                "gpumemtrace"]

    def top_run(trace, *options):  # the profiler recording throughout; `top` beside it switched (top_switch)
        return ["env", f"GMT_TOP_CLI={cli}", *hooks_run(trace, "top", *options)]

    configs = {
        "control": ("A/A control (raw)", lambda trace: [*me, "control"]),
        "cupti": ("gpumemtrace cupti", lambda trace: cupti_run(trace)),
        # The cupti backend without PyTorch's tensor blocks: CUPTI's dispatch on the step's driver calls, and the
        # few CUDA-level events (issue 33 part 4).
        "cupti-cuda": ("cupti, CUDA level", lambda trace: cupti_run(trace, "--no-torch-blocks")),
        "hooks": ("gpumemtrace hooks", lambda trace: hooks_run(trace, "gpumemtrace")),
        "blocks": ("tensor blocks alone", lambda trace: hooks_run(trace, "blocks")),
        "cuda": ("CUDA level alone", lambda trace: hooks_run(trace, "gpumemtrace", "--no-torch-blocks")),
        "recorder": ("PyTorch recorder", lambda trace: [*me, "recorder"]),
        # The cut (recorder/stacks.cpp, GMT_STACK_CUT=1): a kept walk checked only up to CPython's eval loop.
        "hooks-cut": ("hooks, the cut", lambda trace: ["env", "GMT_STACK_CUT=1", *hooks_run(trace, "gpumemtrace")]),
        "blocks-cut": ("blocks alone, cut", lambda trace: ["env", "GMT_STACK_CUT=1", *hooks_run(trace, "blocks")]),
        # Without the code watcher (3.12+, python/gpumemtrace_inprocess/code_watch.py): keys read the code objects.
        "hooks-nowatch": ("hooks, no watcher",
                          lambda trace: ["env", "GMT_CODE_WATCH=0", *hooks_run(trace, "gpumemtrace")]),
        # Tensor blocks with their Python frames only, no native walk (GMT_BLOCK_STACKS=python, off by default).
        "hooks-python": ("hooks, blocks Python", lambda trace: ["env", "GMT_BLOCK_STACKS=python",
                                                                *hooks_run(trace, "gpumemtrace")]),
        "blocks-python": ("blocks, Python only", lambda trace: ["env", "GMT_BLOCK_STACKS=python",
                                                                *hooks_run(trace, "blocks")]),
        # Every event, no stack at all (`run --no-stacks`): the floor under any scheme that takes fewer stacks
        # (sampled ones included), since the event itself stays.
        "hooks-nostacks": ("hooks, no stacks", lambda trace: hooks_run(trace, "gpumemtrace", "--no-stacks")),
        "blocks-nostacks": ("blocks, no stacks", lambda trace: hooks_run(trace, "blocks", "--no-stacks")),
        # Tensor blocks' stacks sampled (`run --sample-block-stacks`): blocks of at least the size all take theirs,
        # smaller ones one per that many bytes. This step's activations are 4-16 MiB (batch 16), its small blocks
        # weights' gradients and scalars.
        "hooks-sampled": ("hooks, sampled 16MiB", lambda trace: hooks_run(trace, "gpumemtrace",
                                                                          "--sample-block-stacks", "16MiB")),
        "hooks-sampled64": ("hooks, sampled 64MiB", lambda trace: hooks_run(trace, "gpumemtrace",
                                                                            "--sample-block-stacks", "64MiB")),
        "blocks-sampled": ("blocks, sampled 16MiB", lambda trace: hooks_run(trace, "blocks",
                                                                           "--sample-block-stacks", "16MiB")),
        # Our writer thread on cores of its own (move_writer_apart): the writer's competition for the app's cores.
        "hooks-writer-apart": ("hooks, writer apart", lambda trace: ["env", "GMT_BENCH_WRITER_APART=1",
                                                                     *hooks_run(trace, "gpumemtrace")]),
        # `gpumemtrace top --interval 1` watching the process, on its full trace and on an aggregate one (issue 36).
        "top": ("top, full trace", lambda trace: top_run(trace)),
        "top-aggregate": ("top, aggregate", lambda trace: top_run(trace, "--aggregate")),
    }
    if "--configs" in args:
        wanted = args[args.index("--configs") + 1].split(",")
        unknown = [c for c in wanted if c not in configs]
        if unknown:
            raise SystemExit(f"unknown configuration(s) {unknown}; known: {', '.join(configs)}")
        configs = {key: configs[key] for key in wanted}
    print(f"6-layer transformer encoder (d_model 512, batch {batch} x 256 tokens, bf16 autocast); per process "
          f"{blocks} blocks of {block_steps} timed steps (train, then inference), the measured work on and off in "
          f"ABBA order; cost over {blocks // 2} adjacent (on, off) pairs: median, and mean +- 95% interval")
    print(f"{'configuration':20} {'train step (off)':>16} {'train cost median':>18} {'mean +- 95%':>18} "
          f"{'inference (off)':>16} {'inference median':>17} {'mean +- 95%':>18} {'events/step':>12} "
          f"{'train host off/on':>18} {'infer host off/on':>18}")
    calls_counted = {}  # by phase: the control's count of the step's CUDA calls (cuda_calls_per_step)
    with tempfile.TemporaryDirectory() as tmp:
        for key, (label, command) in configs.items():
            trace = os.path.join(tmp, f"{key}.db")
            measured = run_config(command(trace))
            if key == "control":
                calls_counted = {phase: measured[phase] for phase in ("train", "infer")
                                 if "launches_per_step" in measured[phase]}
            per_step, events_per_step, infer_events_per_step = "-", None, None
            timed_on_steps = blocks // 2 * (block_steps + 1)
            if os.path.exists(trace) and not key.startswith(("blocks", "top")):
                check_pauses(trace, blocks)
                # Ranges are recorded only in "on" blocks: events inside them are the profiler's work per step.
                events_per_step = events_per_train_step(trace, timed_on_steps)
                infer_events_per_step = events_per_train_step(trace, timed_on_steps, "inference")
            elif os.path.exists(trace) and key.startswith("blocks"):
                # Only the tensor blocks are switched (no pauses): the on blocks' ranges are those holding blocks.
                events_per_step = events_per_train_step(trace, timed_on_steps, tensor_blocks_only=True)
                infer_events_per_step = events_per_train_step(trace, timed_on_steps, "inference",
                                                              tensor_blocks_only=True)
            per_step = f"{events_per_step:.2f}" if events_per_step is not None else "-"
            train, infer = measured["train"], measured["infer"]
            print(f"{label:20} {train['off_ms']:13.3f} ms {train['median']:+17.3f}% "
                  f"{train['mean']:+10.3f}+-{train['ci95']:.3f}% {infer['off_ms']:13.3f} ms "
                  f"{infer['median']:+16.3f}% {infer['mean']:+10.3f}+-{infer['ci95']:.3f}% {per_step:>12} "
                  f"{train['host_off_ms']:8.3f}/{train['host_on_ms']:.3f} ms "
                  f"{infer['host_off_ms']:8.3f}/{infer['host_on_ms']:.3f} ms", flush=True)
            print(f"{'':20} CPU ms per step by thread, off -> on: " + "; ".join(
                f"{phase} " + ", ".join(f"{group} {measured[phase]['cpu_off_ms'].get(group, 0):.2f} -> "
                                        f"{measured[phase]['cpu_on_ms'].get(group, 0):.2f}"
                                        for group in ("main", "writer", "other"))
                for phase in ("train", "infer")) + self_cost_note(trace), flush=True)
            for phase, measured_phase, count in (("train", train, events_per_step),
                                                 ("inference", infer, infer_events_per_step)):
                if count:
                    print(f"{'':20} {stated_against_measured(trace, phase, measured_phase, count)}", flush=True)
            for phase in calls_counted:
                if key == "control" or key.startswith("cupti"):
                    print(f"{'':20} {per_cuda_call(phase, calls_counted[phase], measured[phase])}", flush=True)


if __name__ == "__main__":
    main()
