#!/usr/bin/env python3
"""On a GPU (issue 35): samples/torch_serving.py served for DURATION seconds plain, then under
`gpumemtrace run --aggregate`: requests served per second in each, the aggregate trace's size per hour of serving,
the report's time and memory, and the leak named at its Python line with the exact kept bytes.

Usage (from the repository root, on the GPU machine, after scripts/gpu-suite.sh built BUILD_DIR):
    python3 bench/torch_serving_aggregate.py BUILD_DIR [--duration 600] [--leak-every 500] [--out DIR]
                                             [--mode both|plain|aggregate]
A device call lasts at most 10 minutes: for 10 minutes of serving, run --mode plain and --mode aggregate in two
calls (each prints its requests per second). Prints FIGURE lines; exits 1 when the leak is not named exactly.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "samples", "torch_serving.py")


def served(stdout):
    m = re.search(r"served: requests=(\d+) seconds=([\d.]+)", stdout)
    return int(m.group(1)), float(m.group(2))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--duration", type=float, default=600)
    parser.add_argument("--leak-every", type=int, default=500)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--mode", choices=("both", "plain", "aggregate"), default="both")
    args = parser.parse_args()
    cli = benchlib.paths(args.build)["cli"]
    os.makedirs(args.out, exist_ok=True)
    trace = os.path.join(args.out, "torch_serving.aggregate.db")
    if os.path.exists(trace):
        os.remove(trace)
    command = [sys.executable, SAMPLE, str(args.duration), str(args.leak_every)]

    if args.mode != "aggregate":
        plain = subprocess.run(command, capture_output=True, text=True, check=True)
        plain_requests, plain_s = served(plain.stdout)
        print(f"FIGURE torch_serving plain: {plain_requests} requests in {plain_s:.0f} s = "
              f"{plain_requests / plain_s:.1f}/s")
        if args.mode == "plain":
            return
    start = time.perf_counter()
    profiled = subprocess.run([cli, "run", "--aggregate", "-o", trace, "--", *command], capture_output=True, text=True)
    run_s = time.perf_counter() - start
    if profiled.returncode != 0:
        sys.exit(f"run --aggregate failed ({profiled.returncode}): {profiled.stderr[-2000:]}")
    agg_requests, agg_s = served(profiled.stdout)
    truth = dict(re.findall(r"(kept_buffers|kept_bytes|leak_line)=(\d+)", profiled.stdout))
    size = os.path.getsize(trace)
    report_path = os.path.join(args.out, "torch_serving.aggregate.json")
    wall, _, rss_mib = benchlib.run_measured([cli, "report", "--format", "json", "-o", report_path, trace])
    with open(report_path) as f:
        report = json.load(f)
    leak = next((l for l in report["leaks"]
                 if any(fr.get("line") == int(truth["leak_line"]) and (fr.get("file") or "").endswith("torch_serving.py")
                        for fr in l["stack"])), None)
    exact = leak is not None and leak["bytes"] == int(truth["kept_bytes"]) and leak["count"] == int(truth["kept_buffers"])
    agg = report["aggregate"] or {}
    ratio = f" ({agg_requests / agg_s / (plain_requests / plain_s):.3f}x of plain)" if args.mode == "both" else ""
    print(f"FIGURE torch_serving --aggregate: {agg_requests} requests in {agg_s:.0f} s = {agg_requests / agg_s:.1f}/s"
          f"{ratio}; run {run_s:.0f} s")
    print(f"FIGURE aggregate trace: {size / 1e6:.1f} MB for {agg_s:.0f} s of serving = {size / agg_s * 3600 / 1e6:.1f} MB "
          f"per hour; {agg.get('events_kept')} of {agg.get('events_seen')} events kept; window {agg.get('window_ns')} ns")
    print(f"FIGURE report: {wall:.1f} s, {rss_mib:.0f} MiB peak")
    print(f"FIGURE leak at torch_serving.py:{truth['leak_line']}: "
          f"{leak['bytes'] if leak else 0} B in {leak['count'] if leak else 0} "
          f"(truth {truth['kept_bytes']} B in {truth['kept_buffers']}): {'exact' if exact else 'NOT exact'}")
    sys.exit(0 if exact else 1)


if __name__ == "__main__":
    main()
