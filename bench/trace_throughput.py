#!/usr/bin/env python3
"""Recorder and analyzer throughput on the build machine (no GPU: the simulated runtime, whose calls cost
almost nothing, so the profiler's own cost is what is measured). Prints, for each size:
- the profiled run: events recorded per second of the run, and the trace's bytes per event;
- `report`: seconds and peak resident memory to analyze the trace.

Usage: bench/trace_throughput.py BUILD_DIR [pairs_per_thread ...]   (8 threads; default 25000 125000)
"""
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time


def run_child(command, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak_kib, before)


def main():
    build = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [25000, 125000]
    cli = os.path.join(build, "bin", "gpumemtrace")
    sample = os.path.join(build, "samples", "threaded")
    sim = os.path.join(build, "lib", "gpumemtrace", "sim")
    print(f"{'events':>10} {'run s':>7} {'raw s':>7} {'events/s':>11} {'B/event':>8} {'report s':>9} {'report MiB':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for pairs in sizes:
            trace = os.path.join(tmp, f"t{pairs}.db")
            raw_env = dict(os.environ, LD_LIBRARY_PATH=sim, GMT_SIM_QUIET="1")
            raw_s, _ = run_child([sample, "8", str(pairs)], env=raw_env)
            run_s, _ = run_child([cli, "run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--",
                                  sample, "8", str(pairs)])
            db = sqlite3.connect(trace)
            events = db.execute("SELECT count(*) FROM events").fetchone()[0]
            db.close()
            size = os.path.getsize(trace)
            report_s, report_kib = run_child([cli, "report", "--format", "json", "-o", os.devnull, trace])
            print(f"{events:>10} {run_s:>7.2f} {raw_s:>7.2f} {events / run_s:>11.0f} {size / events:>8.1f} "
                  f"{report_s:>9.2f} {report_kib / 1024:>10.0f}")
    print("(8 threads x pairs alloc+free each; run s includes process start and the final flush;"
          " report MiB is the largest child RSS so far)")


if __name__ == "__main__":
    main()
