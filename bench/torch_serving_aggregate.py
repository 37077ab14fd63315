#!/usr/bin/env python3
"""On a GPU (issue 35): samples/torch_serving.py served for DURATION seconds plain, then under
`gpumemtrace run --aggregate`: requests served per second in each, the aggregate trace's size per hour of serving,
the report's time and memory, and the leak named at its Python line with the exact kept bytes.

Usage (from the repository root, on the GPU machine, after scripts/gpu-suite.sh built BUILD_DIR):
    python3 bench/torch_serving_aggregate.py BUILD_DIR [--duration 600] [--leak-every 500] [--out DIR]
                                             [--mode both|plain|aggregate] [--top-window S]
A device call lasts at most 10 minutes: for 10 minutes of serving, run --mode plain and --mode aggregate in two
calls (each prints its requests per second), the second started with setsid so that it outlives its call.
--top-window S also switches `gpumemtrace top --interval 1` on in every other window of S seconds of the aggregate
run and prints what it cost the service (bench/serving_windows.py). Prints FIGURE lines; exits 1 when the leak is
not named exactly.
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
import serving_windows  # noqa: E402

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
    parser.add_argument("--top-window", type=float, default=0, help="seconds per window with and without top")
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
    if args.top_window:
        stdout = serve_with_top(cli, trace, command, args)
    else:
        profiled = subprocess.run([cli, "run", "--aggregate", "-o", trace, "--", *command], capture_output=True,
                                  text=True)
        if profiled.returncode != 0:
            sys.exit(f"run --aggregate failed ({profiled.returncode}): {profiled.stderr[-2000:]}")
        stdout = profiled.stdout
    run_s = time.perf_counter() - start
    agg_requests, agg_s = served(stdout)
    truth = dict(re.findall(r"(kept_buffers|kept_bytes|leak_line)=(\d+)", stdout))
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


def serve_with_top(cli, trace, command, args, warmup_s=10):
    """The aggregate run with ticks, `top` on in every other window; prints top's cost and returns the stdout."""
    windows = int((args.duration - warmup_s - 2) // args.top_window)
    windows -= 1 - windows % 2  # odd: off, on, ..., off
    app = subprocess.Popen([cli, "run", "-q", "--aggregate", "-o", trace, "--", *command, "0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output = serving_windows.ServiceOutput(app)
    first = output.first_tick(app)
    if first is None:
        app.kill()
        sys.exit(f"the service printed no tick: {output.finish()[1][-2000:]}")
    done = serving_windows.toggle_top(cli, trace, os.path.join(args.out, "top"), first + warmup_s, windows,
                                      args.top_window, until=first + args.duration - 1)
    app.wait()
    stdout, stderr = output.finish()
    if app.returncode != 0:
        sys.exit(f"run --aggregate failed ({app.returncode}): {stderr[-2000:]}")
    cost, control, rates = serving_windows.watcher_cost(output.ticks, done.spans)
    off = [rate for index, rate in enumerate(rates) if index % 2 == 0]
    print(f"FIGURE top beside the aggregate run: {cost:+.2%} requests/s in {len(rates) // 2} windows of "
          f"{args.top_window:.0f} s against the off-windows either side (A/A control {control:+.2%}); top's exits "
          f"{sorted(set(done.exits))}, frames per window {min(done.frames)}-{max(done.frames)}, its CPU "
          f"{sum(done.cpu_s) / len(done.cpu_s) / args.top_window:.1%} of a core; off-windows "
          f"{sum(off) / len(off):.1f} requests/s; windows {[round(rate, 1) for rate in rates]}")
    return stdout


if __name__ == "__main__":
    main()
