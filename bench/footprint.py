#!/usr/bin/env python3
"""The profiler's footprint inside the app: bench/event_flood makes EVENTS allocation events (8 threads of
cudaMalloc+cudaFree pairs) under `gpumemtrace run --simulate`, and prints its own peak resident memory
(VmHWM) and thread count from /proc/self/status after its loop, with the profiler's writer thread and
buffers still there; raw for comparison. Target (issue 8): < 64 MiB for 10 million events.

Usage: bench/footprint.py BUILD_DIR [--events N] [--rounds R] [--baseline OTHER_BUILD_DIR] [--smoke]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_throughput  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    threads = 8
    pairs = max(1, args.events // (2 * threads))
    argv = [sys.argv[0], args.build, "--rounds", str(args.rounds), "--threads", str(threads), "--pairs", str(pairs)]
    if args.baseline:
        argv += ["--baseline", args.baseline]
    if args.smoke:
        argv += ["--smoke"]
    sys.argv = argv
    print("footprint: read the VmHWM MiB and threads columns (the app's own figures, profiler included)")
    trace_throughput.main()


if __name__ == "__main__":
    main()
