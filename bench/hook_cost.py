#!/usr/bin/env python3
"""What a hooked allocation+free pair costs the app thread, on the CPU, side by side in one run.

Runs bench/hook_cost (one thread, PAIRS pairs of cudaMalloc+cudaFree and cudaMallocAsync+cudaFreeAsync 256 B,
DEPTH frames below main) on the simulated runtime: raw, under `gpumemtrace run --simulate --no-symbolize`
(runtime hooks, stacks on), and with `--no-stacks`; optionally a second build (`--baseline DIR`) in the
same rounds. Cases are interleaved, several rounds; it prints the thread-CPU ns per pair (median, min-max)
and the ratio of medians to raw. Thread CPU time, not wall time: on the shared build machine a thread waits
for a core, and that is not the profiler's cost. Every profiled run is checked: its trace holds exactly the
allocations and frees the program made, every allocation with a stack (none with --no-stacks).

The simulated runtime's calls cost far less than a real driver's (~0.3 us against 1.4-6.6 us per pair on
the H200), so the ratios here are much larger than on a GPU: the added ns per pair is the figure to carry
over. bench/overhead.py measures the ratios on a GPU.

Usage: bench/hook_cost.py BUILD_DIR [--pairs N] [--depth D] [--rounds R] [--baseline DIR] [--smoke]
  --smoke: tiny sizes, one round, the same checks (CTest label bench-smoke); no timing is judged.
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

import benchlib

CASES = ("cudaMalloc+cudaFree 256 B", "cudaMallocAsync+cudaFreeAsync 256 B")
# Pairs made by hook_cost per case: warm-up (5 x min(pairs, 2000)) + the timed 5 x pairs, plus its own
# cudaFree(nullptr) (not a free) and stream calls, which take no allocation event.
REPETITIONS = 5


def run_case(build, cli_build, pairs, depth, trace, options):
    bench = os.path.join(cli_build, "bench", "hook_cost")
    env = dict(os.environ, GMT_SIM_QUIET="1")
    if options is None:
        env["LD_LIBRARY_PATH"] = benchlib.paths(cli_build)["sim"]
        command = [bench, str(pairs), str(depth)]
    else:
        cli = benchlib.paths(build)["cli"]
        command = [cli, "run", "-q", "--no-symbolize", "--simulate", *options, "-o", trace, "--", bench,
                   str(pairs), str(depth)]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    values = benchlib.key_values(out)
    figures = {case: values[case] for case in CASES if case in values}
    if set(figures) != set(CASES):
        sys.exit(f"hook_cost printed {sorted(figures)}, expected {list(CASES)}:\n{out}")
    if options is not None:
        figures["self"] = check_trace(trace, pairs, with_stacks="--no-stacks" not in options)
    return figures


def check_trace(trace, pairs, with_stacks):
    """Zero loss and the right stacks: allocations == frees == what the program made. Returns the recorder's own
    ns per CUDA-level event as the trace states it (meta self_cost_cuda_ns_per_event, recorder/self_cost.h), or None
    from a build older than that figure (a --baseline)."""
    expected = 2 * REPETITIONS * (min(pairs, 2000) + pairs)
    db = sqlite3.connect(trace)
    try:
        allocs, with_stack = db.execute(
            "SELECT count(*), count(NULLIF(stack_id, 0)) FROM events WHERE kind = 1").fetchone()
        frees = db.execute("SELECT count(*) FROM events WHERE kind = 2").fetchone()[0]
        dropped = db.execute("SELECT value FROM meta WHERE key = 'dropped_events'").fetchone()[0]
        self_cost = db.execute("SELECT value FROM meta WHERE key = 'self_cost_cuda_ns_per_event'").fetchone()
    finally:
        db.close()
    if (allocs, frees, dropped) != (expected, expected, "0"):
        sys.exit(f"{trace}: {allocs} allocations, {frees} frees, dropped {dropped}; expected {expected} each")
    if with_stack != (allocs if with_stacks else 0):
        sys.exit(f"{trace}: {with_stack} of {allocs} allocations have a stack (stacks {'on' if with_stacks else 'off'})")
    os.remove(trace)
    return float(self_cost[0]) if self_cost is not None else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--baseline", help="another build directory, measured in the same rounds")
    parser.add_argument("--pairs", type=int, default=200000)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.pairs = 1, 500
    variants = [("raw", args.build, None), ("stacks", args.build, []), ("no stacks", args.build, ["--no-stacks"])]
    if args.baseline:
        variants += [("baseline stacks", args.baseline, []), ("baseline no stacks", args.baseline, ["--no-stacks"])]
    samples = {name: {case: [] for case in (*CASES, "self")} for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for index, (name, build, options) in enumerate(variants):
                trace = os.path.join(tmp, f"round{r}-{index}.db")
                for case, ns in run_case(build, args.build, args.pairs, args.depth, trace, options).items():
                    samples[name][case].append(ns)
    print(f"hook_cost: {args.pairs} pairs per case, call site {args.depth} frames below main, {args.rounds} "
          f"rounds interleaved; thread CPU ns per pair, median (min-max); x: ratio of medians to raw; "
          f"load average at the end: {benchlib.load_average()}")
    header = ["case"] + [name for name, _, _ in variants]
    rows = []
    for case in CASES:
        raw = statistics.median(samples["raw"][case])
        row = [case]
        for name, _, _ in variants:
            values = samples[name][case]
            cell = benchlib.spread(values, "{:.0f}") + " ns"
            if name != "raw":
                cell += f" ({statistics.median(values) / raw:.2f}x, +{statistics.median(values) - raw:.0f} ns)"
            row.append(cell)
        rows.append(row)
    benchlib.print_table(header, rows)
    print("checked: every profiled trace holds exactly the pairs the program made, dropped_events = 0, "
          "every allocation with a stack (none with --no-stacks)")
    # What `run`'s summary tells the user of our cost, against what this benchmark measures: the added thread CPU
    # time per event (half a pair's, both cases' mean). Issue 33 part 5 asks them to agree within 30%.
    build_of = {name: build for name, build, _ in variants}
    for name, _, options in variants:
        if options is None:
            continue
        added = statistics.mean(statistics.median(samples[name][case]) - statistics.median(samples["raw"][case])
                                for case in CASES) / 2
        if None in samples[name]["self"]:
            if build_of[name] == args.build:
                sys.exit(f"{name}: a trace of {args.build} states no self_cost_cuda_ns_per_event")
            print(f"{name}: this build states no cost of its own; measured +{added:.0f} ns per event against raw")
            continue
        stated = statistics.median(samples[name]["self"])
        print(f"{name}: the trace states {stated:.0f} ns of the recorder's own time per CUDA-level event; measured "
              f"+{added:.0f} ns per event against raw: stated / measured {stated / added:.2f}" if added > 0 else
              f"{name}: the trace states {stated:.0f} ns per CUDA-level event; measured no added time")
    if args.smoke:
        for name in samples:
            for case in CASES:
                if not all(v > 0 for v in samples[name][case]):
                    sys.exit(f"missing figure: {name} {case}")


if __name__ == "__main__":
    main()
