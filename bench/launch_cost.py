#!/usr/bin/env python3
"""What each backend adds to the CUDA calls that are not allocations (kernel launches, event records, stream
queries, cudaGetDevice), side by side in one run, on a GPU.

A training step makes thousands of such calls per few hundred allocations. The hooks backend does not intercept
them; CUPTI, once any driver-API callback is enabled, may route every driver call through its dispatch. Runs
bench/launch_cost (one thread, batches of calls timed on the wall clock) raw, raw again (the A/A control), under
`gpumemtrace run --backend hooks` and `--backend cupti`, interleaved for several rounds; prints per case the
median host ns per call and what each configuration adds to raw. Each profiled run's trace must hold the
program's one cudaMalloc.

Usage: bench/launch_cost.py BUILD_DIR [--rounds R=5] [--batches B=400]
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

import benchlib

CASES = ("kernel launch", "cudaEventRecord", "cudaStreamQuery", "cudaGetDevice")


def configurations(build, trace_dir):
    cli = os.path.join(build, "bin", "gpumemtrace")

    def profiled(backend):
        return lambda program, n: [cli, "run", "-q", "--no-symbolize", "--backend", backend, "-o",
                                   os.path.join(trace_dir, f"{backend}-{n}.db"), "--", *program]
    return {
        "raw": lambda program, n: program,
        "raw again (A/A)": lambda program, n: program,
        "hooks": profiled("hooks"),
        "cupti": profiled("cupti"),
    }


def check_trace(trace):
    """The profiled run saw the program's 1 MiB allocation: it was recording."""
    with sqlite3.connect(trace) as db:
        found = db.execute("SELECT count(*) FROM events WHERE kind = 1 AND size = 1048576").fetchone()[0]
    if found != 1:
        raise SystemExit(f"{trace}: {found} allocations of 1 MiB recorded, expected the program's one")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=400)
    args = parser.parse_args()
    program = [os.path.join(args.build, "bench", "launch_cost"), str(args.batches)]
    figures = {}
    with tempfile.TemporaryDirectory() as trace_dir:
        configs = configurations(args.build, trace_dir)
        for n in range(args.rounds):
            for name, command in configs.items():
                result = subprocess.run(command(program, n), capture_output=True, text=True, timeout=600)
                if result.returncode != 0:
                    raise SystemExit(f"{name}: exit {result.returncode}\n{result.stderr[-2000:]}")
                if name in ("hooks", "cupti"):
                    check_trace(os.path.join(trace_dir, f"{name}-{n}.db"))
                values = benchlib.key_values(result.stdout)
                for case in CASES:
                    figures.setdefault((name, case), []).append(values[case])
    print(f"host ns per call, median of {args.rounds} interleaved rounds (min-max); + ns: added to raw's median")
    header = ["case", *configs]
    rows = []
    for case in CASES:
        raw = statistics.median(figures[("raw", case)])
        row = [case, benchlib.spread(figures[("raw", case)], "{:.0f}")]
        for name in list(configs)[1:]:
            values = figures[(name, case)]
            row.append(f"{benchlib.spread(values, '{:.0f}')}, {statistics.median(values) - raw:+.0f}")
        rows.append(row)
    benchlib.print_table(header, rows)


if __name__ == "__main__":
    sys.exit(main())
