#!/usr/bin/env python3
"""Where the CPU stand-in's step cost goes, split by arm: bench/torch_cpu_blocks.py's "blocks" configuration run
under `perf record` (cpu-clock, CLOCK_MONOTONIC timestamps), each sample put in the on- or off-block it fell in
(the worker logs each timed block's span: GMT_BENCH_ARM_LOG), then CPU ms per step by thread and library, off ->
on. A step that is slower with blocks on while the app's own libraries take no more CPU spends the difference in
our code (libgpumemtrace.so on the app's threads) or in our writer thread; a step whose app libraries take more
CPU pays for something we do to them (caches, page faults).

Usage: bench/profile_by_arm.py BUILD_DIR [--python PY] [--blocks N=24] [--frequency HZ=4000] [--config blocks]
       (--config: one of torch_cpu_blocks.py's, e.g. blocks-nostacks)
Needs perf (any event: cpu-clock is used, as on machines without hardware counters) and torch (CPU is enough).
"""
import argparse
import bisect
import collections
import os
import re
import subprocess
import sys
import tempfile

SAMPLE = re.compile(r"^\s*(\S+)\s+(\d+)\s+([\d.]+):\s+\S+\s+\((.*)\)\s*$")  # comm tid time: ip (dso)


def read_blocks(path):
    """[(start_ns, end_ns, phase, on, steps, pid)] in time order."""
    blocks = []
    with open(path) as log:
        for line in log:
            phase, start, end, on, steps, pid = line.split()
            blocks.append((int(start), int(end), phase, on == "1", int(steps), int(pid)))
    return sorted(blocks)


def thread_group(comm, tid, pid):
    if comm == "gmt-writer":
        return "writer"
    return "main" if tid == pid else "other"


def split_samples(perf_data, blocks):
    """Samples per (phase, on, thread group, library), and steps per (phase, on)."""
    steps = collections.Counter()
    for _, _, phase, on, count, _ in blocks:
        steps[(phase, on)] += count
    starts = [b[0] for b in blocks]
    samples = collections.Counter()
    script = subprocess.Popen(["perf", "script", "-i", perf_data, "-F", "comm,tid,time,ip,dso"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in script.stdout:
        m = SAMPLE.match(line)
        if not m:
            continue
        comm, tid, seconds, dso = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        t = int(seconds.replace(".", "")) * 1000 if len(seconds.split(".")[1]) == 6 else int(float(seconds) * 1e9)
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or t > blocks[i][1]:
            continue
        _, _, phase, on, _, pid = blocks[i]
        samples[(phase, on, thread_group(comm, tid, pid), os.path.basename(dso))] += 1
    script.wait()
    return samples, steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--frequency", type=int, default=4000)
    parser.add_argument("--config", default="blocks")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(prefix="gmt-profile-by-arm-") as folder:
        arm_log, perf_data = os.path.join(folder, "arms.log"), os.path.join(folder, "perf.data")
        bench = [args.python, os.path.join(here, "torch_cpu_blocks.py"), args.build, "--python", args.python,
                 "--configs", args.config, "--blocks", str(args.blocks)]
        run = subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F",
                              str(args.frequency), "-o", perf_data, "--", *bench],
                             env=dict(os.environ, GMT_BENCH_ARM_LOG=arm_log), capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"perf record ... torch_cpu_blocks.py failed ({run.returncode}):\n{run.stderr[-3000:]}")
        print(run.stdout, end="")
        samples, steps = split_samples(perf_data, read_blocks(arm_log))
    period_ms = 1e3 / args.frequency
    for phase in ("train", "infer"):
        off_steps, on_steps = steps[(phase, False)], steps[(phase, True)]
        if not off_steps or not on_steps:
            continue
        print(f"{phase}: CPU ms per step by thread and library, blocks off -> on ({off_steps} / {on_steps} steps; "
              f"one sample = {period_ms:.2f} ms; rows under 0.02 ms left out)")
        keys = {(group, dso) for (p, _, group, dso) in samples if p == phase}
        rows = []
        for group, dso in keys:
            off = samples[(phase, False, group, dso)] * period_ms / off_steps
            on = samples[(phase, True, group, dso)] * period_ms / on_steps
            rows.append((on - off, group, dso, off, on))
        for change, group, dso, off, on in sorted(rows, reverse=True):
            if max(off, on) >= 0.02:
                print(f"  {group:7s} {dso:28s} {off:7.3f} -> {on:7.3f}  {change:+7.3f}")
        for group in ("main", "other", "writer"):
            off = sum(r[3] for r in rows if r[1] == group)
            on = sum(r[4] for r in rows if r[1] == group)
            print(f"  {group:7s} {'(all)':28s} {off:7.3f} -> {on:7.3f}  {on - off:+7.3f}")


if __name__ == "__main__":
    sys.exit(main())
