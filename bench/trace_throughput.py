#!/usr/bin/env python3
"""Writer throughput, trace size and the profiler's footprint on the build machine (no GPU: the simulated
runtime, whose calls cost almost nothing, so what is measured is the profiler's own cost). bench/event_flood
(THREADS threads of cudaMalloc+cudaFree pairs, as fast as they go: the app outruns the writer on purpose)
runs raw and under `gpumemtrace run --simulate --no-symbolize`, interleaved, for each build given. Per case:
- events/s (loop): events recorded per second of the app's allocation loop (under back-pressure the loop
  runs at the writer's sustained pace, give or take the buffered backlog); events/s (whole run): per second
  of the whole `gpumemtrace run`, process start and the final flush included (a lower bound);
- CPU us/event: of the whole process during the loop (the backlog still buffered at its end is not in
  it), of the whole run (app, final flush and CLI: the fair comparison between builds whose buffers
  differ), and of the writer thread during the loop;
- B/event: trace file bytes per event; zero loss: events in the trace == events the app made, and
  dropped_events == 0; back-pressure: waits and total wait the trace records;
- VmHWM and threads of the app at the end of its loop (the writer and its buffers still there).

Usage: bench/trace_throughput.py BUILD_DIR [--baseline OTHER_BUILD_DIR] [--rounds N] [--threads T]
                                 [--pairs P] [--smoke]
--smoke: one tiny round, checks zero loss and that every figure is there; no timing is judged (CI).
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def one_run(build, flood_build, threads, pairs, trace, raw):
    p = benchlib.paths(build)
    flood = benchlib.paths(flood_build)["flood"]
    if raw:
        env = dict(os.environ, LD_LIBRARY_PATH=p["sim"], GMT_SIM_QUIET="1")
        _, cpu, _, out = benchlib.run_child([flood, str(threads), str(pairs)], env=env)
        values = benchlib.key_values(out)
        values["run_cpu_s"] = cpu
        return values, None
    if os.path.exists(trace):
        os.remove(trace)
    wall, cpu, _, out = benchlib.run_child([p["cli"], "run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--",
                                       flood, str(threads), str(pairs)])
    values = benchlib.key_values(out)
    values["run_s"] = wall
    values["run_cpu_s"] = cpu
    meta = benchlib.meta(trace)
    stored = benchlib.count_rows(trace, "events")
    if stored != int(values["events"]) or meta.get("dropped_events") != "0":
        sys.exit(f"LOSS: the app made {int(values['events'])} events, the trace holds {stored} "
                 f"(dropped_events={meta.get('dropped_events')})")
    values["bytes_per_event"] = os.path.getsize(trace) / stored
    values["backpressure_waits"] = float(meta.get("backpressure_waits", 0))
    values["backpressure_wait_s"] = float(meta.get("backpressure_wait_ns", 0)) / 1e9
    return values, meta


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--baseline", help="another build dir, measured side by side (same event_flood)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=125000)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.pairs, args.threads = 1, 2000, 4
    builds = [("this build", args.build)] + ([("baseline", args.baseline)] if args.baseline else [])
    results = {name: [] for name, _ in builds}
    raw = []
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "flood.db")
        for _ in range(args.rounds):
            raw.append(one_run(args.build, args.build, args.threads, args.pairs, trace, raw=True)[0])
            for name, build in builds:
                results[name].append(one_run(build, args.build, args.threads, args.pairs, trace, raw=False)[0])
    events = int(raw[0]["events"])
    print(f"event_flood {args.threads} threads x {args.pairs} pairs = {events} events, {args.rounds} rounds, "
          f"interleaved; load average at the end: {benchlib.load_average()}")
    header = ["case", "events/s (loop)", "events/s (whole run)", "CPU us/event (loop)", "CPU us/event (whole run)", "writer CPU us/event (loop)", "B/event", "back-pressure waits",
              "waited s (all threads)", "VmHWM MiB", "threads"]
    rows = [["raw", benchlib.spread([events / r["loop_s"] for r in raw], "{:,.0f}"), "-",
             benchlib.spread([r["loop_cpu_s"] * 1e6 / events for r in raw]),
             benchlib.spread([r["run_cpu_s"] * 1e6 / events for r in raw]), "-", "-", "-", "-",
             benchlib.spread([r["vm_hwm_kib"] / 1024 for r in raw], "{:.1f}"),
             benchlib.spread([r["threads"] for r in raw], "{:.0f}")]]
    for name, _ in builds:
        runs = results[name]
        rows.append([name, benchlib.spread([events / r["loop_s"] for r in runs], "{:,.0f}"),
                     benchlib.spread([events / r["run_s"] for r in runs], "{:,.0f}"),
                     benchlib.spread([r["loop_cpu_s"] * 1e6 / events for r in runs]),
                     benchlib.spread([r["run_cpu_s"] * 1e6 / events for r in runs]),
                     benchlib.spread([r["other_threads_cpu_s"] * 1e6 / events for r in runs]),
                     benchlib.spread([r["bytes_per_event"] for r in runs], "{:.1f}"),
                     benchlib.spread([r["backpressure_waits"] for r in runs], "{:.0f}"),
                     benchlib.spread([r["backpressure_wait_s"] for r in runs]),
                     benchlib.spread([r["vm_hwm_kib"] / 1024 for r in runs], "{:.1f}"),
                     benchlib.spread([r["threads"] for r in runs], "{:.0f}")])
    benchlib.print_table(header, rows)
    print("zero loss: every profiled run's trace holds exactly the events the app made, dropped_events = 0")
    if args.smoke:
        for name, _ in builds:
            for r in results[name]:
                for key in ("loop_s", "loop_cpu_s", "vm_hwm_kib", "threads", "bytes_per_event"):
                    if not r.get(key, 0) > 0:
                        sys.exit(f"missing figure {key}")


if __name__ == "__main__":
    main()
