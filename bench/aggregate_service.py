#!/usr/bin/env python3
"""`run --aggregate` on a simulated, time-compressed service (samples/service_loop: variable-length requests from
1000 call sites, a slow leak hidden in one of them), on the build machine (docs/benchmarks.md, issue 35's targets):

1. capture cost: the same service of --compare-events events under `run` (full trace) and `run --aggregate`,
   interleaved for --rounds rounds: the recorder's own time per CUDA event on the app's thread (meta
   self_cost_cuda_ns_per_event, one event in 64 timed) and the service's wall time; the aggregation runs on the
   writer thread, so the app's cost must stay within 5% of the full trace's;
2. the long run: --events events (2e8 by default) under `run --aggregate`: the trace's size, the events/s of the whole
   run, then `report --format json`: its wall time and peak memory, and the leak named at its line with its exact
   bytes (the sample's own truth).

Usage: bench/aggregate_service.py BUILD_DIR [--events N] [--compare-events N] [--rounds R] [--leak-every K]
       [--smoke]     (--smoke: small sizes, checks the figures are there and the leak is exact; CI)
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

EVENTS_PER_REQUEST = 39  # 8..31 temporaries (19.5 on average), each an alloc and a free


def service(build):
    return os.path.join(build, "samples", "service_loop")


def record(build, trace, requests, leak_every, aggregate):
    if os.path.exists(trace):
        os.remove(trace)
    cli = benchlib.paths(build)["cli"]
    mode = ["--aggregate"] if aggregate else []
    wall, cpu, _, out = benchlib.run_child([cli, "run", "--simulate", "-q", "--no-symbolize", *mode, "-o", trace, "--",
                                           service(build), str(requests), "1000", str(leak_every)])
    truth = re.search(r"truth: service events=(\d+) kept_leaks=(\d+) leak_bytes_each=(\d+)", out)
    if not truth:
        sys.exit(f"no truth line from service_loop: {out!r}")
    meta = benchlib.meta(trace)
    return {"wall_s": wall, "cpu_s": cpu, "events": int(truth.group(1)), "kept_leaks": int(truth.group(2)),
            "leak_bytes_each": int(truth.group(3)), "self_ns": float(meta.get("self_cost_cuda_ns_per_event", "nan")),
            "size": os.path.getsize(trace), "meta": meta}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--events", type=float, default=2e8)
    parser.add_argument("--compare-events", type=float, default=4e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--leak-every", type=int, default=500)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.compare_events, args.rounds, args.leak_every = 2e5, 1e5, 1, 50
    cli = benchlib.paths(args.build)["cli"]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "service.db")
        # 1. capture cost per event, full against aggregate, interleaved.
        requests = int(args.compare_events / EVENTS_PER_REQUEST)
        cost = {False: [], True: []}
        for _ in range(args.rounds):
            for aggregate in (False, True):
                cost[aggregate].append(record(args.build, trace, requests, args.leak_every, aggregate))
        print(f"service_loop {requests} requests, 1000 call sites, one 64 KiB buffer kept per {args.leak_every} "
              f"requests, {args.rounds} rounds interleaved; load average at the end: {benchlib.load_average()}")
        rows = []
        for aggregate in (False, True):
            runs = cost[aggregate]
            rows.append(["run --aggregate" if aggregate else "run (full trace)", runs[0]["events"],
                         benchlib.spread([r["self_ns"] for r in runs], "{:.0f}"),
                         benchlib.spread([r["wall_s"] for r in runs]),
                         benchlib.spread([r["size"] / r["events"] for r in runs], "{:.2f}")])
        benchlib.print_table(["case", "events", "recorder ns/event on the app thread", "run wall s", "B/event"], rows)
        full_ns = sorted(r["self_ns"] for r in cost[False])[len(cost[False]) // 2]
        agg_ns = sorted(r["self_ns"] for r in cost[True])[len(cost[True]) // 2]
        print(f"app-thread cost, aggregate / full: {agg_ns / full_ns:.3f} (target <= 1.05)")

        # 2. the long run.
        requests = int(args.events / EVENTS_PER_REQUEST)
        run = record(args.build, trace, requests, args.leak_every, aggregate=True)
        symbolize = benchlib.run_child([cli, "symbolize", trace])[0] if os.path.exists(trace) else 0
        start = time.perf_counter()
        wall, cpu, rss_mib = benchlib.run_measured([cli, "report", "--format", "json", "-o",
                                                    os.path.join(tmp, "r.json"), trace])
        report_s = time.perf_counter() - start
        with open(os.path.join(tmp, "r.json")) as f:
            report = json.load(f)
        leak = next((l for l in report["leaks"] if l["stack"] and "keep_kv_entry" in (l["stack"][0]["function"] or "")),
                    None)
        expected = run["kept_leaks"] * run["leak_bytes_each"]
        exact = leak is not None and leak["bytes"] == expected and leak["count"] == run["kept_leaks"]
        growth = report["growth"]["findings"]
        grows_at_leak = bool(growth) and "keep_kv_entry" in (growth[0]["stacks"][0]["stack"][0]["function"] or "")
        print()
        benchlib.print_table(
            ["events", "run wall s", "events/s (whole run)", "trace MB", "B/event", "report s", "report peak MiB",
             "leak named exactly", "growth at the leak"],
            [[run["events"], f"{run['wall_s']:.1f}", f"{run['events'] / run['wall_s']:.0f}", f"{run['size'] / 1e6:.1f}",
              f"{run['size'] / run['events']:.3f}", f"{report_s:.2f}", f"{rss_mib:.0f}",
              f"{'yes' if exact else 'NO'} ({leak['bytes'] if leak else 0} B in {leak['count'] if leak else 0}; "
              f"truth {expected} B in {run['kept_leaks']})", "yes" if grows_at_leak else "no"]])
        print(f"symbolize: {symbolize:.1f} s; kept {run['meta'].get('aggregate_events_kept')} of "
              f"{run['meta'].get('aggregate_events_seen')} events; window {report['aggregate']['window_ns'] / 1e9:g} s")
        if not exact:
            sys.exit("the leak was not named exactly")


if __name__ == "__main__":
    main()
