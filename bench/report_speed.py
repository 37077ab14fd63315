#!/usr/bin/env python3
"""`gpumemtrace report` on traces of 1, 10 and 50 million events: wall seconds, CPU seconds and peak
resident memory, for this build and (side by side, interleaved) a baseline build, with this build run twice as
an A/A control. Target (issue 8): 10 million events in < 10 s and < 1 GiB on a 2-core machine, growing linearly.

The traces: bench/event_flood (8 threads of cudaMalloc+cudaFree pairs) profiled once for the base size, then
grown by copying its events with shifted times (each copy allocates and frees like the original, so the
live memory stays that of one run). Written by this build's recorder: times in recording order
(meta.events_time_ordered). --unordered also measures the same traces without that key (a trace of an
older version: the reader then holds back up to a million rows to restore time order).

Usage: bench/report_speed.py BUILD_DIR [--baseline OTHER_BUILD_DIR] [--millions 1 10 50] [--rounds R]
                             [--unordered] [--smoke]
"""
import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

EVENT_COLUMNS = "time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, size, stack_id, " \
                "error, handle, context"


def base_trace(build, events, path):
    p = benchlib.paths(build)
    pairs = max(1, events // 16)
    benchlib.run_child([p["cli"], "run", "--simulate", "-q", "--no-symbolize", "-o", path, "--", p["flood"], "8",
                        str(pairs)])


def grow(base, path, events):
    """Copies `base` to `path` and repeats its events until it holds at least `events`."""
    shutil.copyfile(base, path)
    db = sqlite3.connect(path)
    n, first, last = db.execute("SELECT count(*), min(time_ns), max(time_ns) FROM events").fetchone()
    span = last - first + 1
    copies = max(0, -(-events // n) - 1)
    for k in range(1, copies + 1):
        db.execute(f"INSERT INTO events({EVENT_COLUMNS}) SELECT time_ns + ?1, kind, api, source, memory_kind, "
                   f"thread_id, device, stream, address, size, stack_id, error, handle, context FROM events "
                   f"WHERE id <= ?2 ORDER BY id", (k * span, n))
        db.commit()
    end = db.execute("SELECT value FROM meta WHERE key = 'end_monotonic_ns'").fetchone()
    if end:
        db.execute("UPDATE meta SET value = ?1 WHERE key = 'end_monotonic_ns'", (str(int(end[0]) + copies * span),))
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return n * (copies + 1)


def unordered_copy(path, out):
    shutil.copyfile(path, out)
    db = sqlite3.connect(out)
    db.execute("DELETE FROM meta WHERE key = 'events_time_ordered'")
    db.commit()
    db.close()


def without_path(report_json):
    """The report minus the trace's file name (which differs between the copies)."""
    with open(report_json) as f:
        report = json.load(f)
    report.get("trace", {}).pop("path", None)
    return report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--baseline")
    parser.add_argument("--millions", type=float, nargs="+", default=[1, 10, 50])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unordered", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.millions, args.rounds = [0.02, 0.04], 1
    clis = [("this build", benchlib.paths(args.build)["cli"])]
    if args.baseline:
        # The A/A control: this build again, as a case of its own, so that the spread between two identical cases
        # says how much of a difference to the baseline is the machine's.
        clis.append(("this build again (A/A)", benchlib.paths(args.build)["cli"]))
        clis.append(("baseline", benchlib.paths(args.baseline)["cli"]))
    with tempfile.TemporaryDirectory(dir=os.environ.get("GMT_BENCH_TMP")) as tmp:
        base = os.path.join(tmp, "base.db")
        base_trace(args.build, int(min(args.millions) * 1e6), base)
        rows = []
        for millions in args.millions:
            trace = os.path.join(tmp, f"t{millions}.db")
            events = grow(base, trace, int(millions * 1e6))
            variants = [("", trace)]
            if args.unordered:
                unordered = os.path.join(tmp, f"u{millions}.db")
                unordered_copy(trace, unordered)
                variants.append((", no events_time_ordered", unordered))
            figures = {(name, label): [] for name, _ in clis for label, _ in variants}
            outputs = {}
            for _ in range(args.rounds):
                for case, (name, cli) in enumerate(clis):
                    for label, path in variants:
                        out = os.path.join(tmp, f"case{case}{label != ''}.json")
                        figures[(name, label)].append(
                            benchlib.run_measured([cli, "report", "--format", "json", "-o", out, path]))
                        outputs[(name, label)] = out
            reference = without_path(next(iter(outputs.values())))
            for key, out in outputs.items():
                if without_path(out) != reference:
                    sys.exit(f"report differs between cases ({key[0]}{key[1]}) on {events} events")
            for (name, label), runs in figures.items():
                rows.append([f"{events:,}", name + label, benchlib.spread([r[0] for r in runs]),
                             benchlib.spread([r[1] for r in runs]), benchlib.spread([r[2] for r in runs], "{:.0f}"),
                             f"{sorted(r[1] for r in runs)[len(runs) // 2] / events * 1e6:.2f}"])
            os.remove(trace)
    print(f"report --format json, {args.rounds} rounds interleaved; load average at the end: "
          f"{benchlib.load_average()}")
    benchlib.print_table(["events", "case", "wall s", "CPU s", "peak RSS MiB", "CPU s per million"], rows)
    print("every case's JSON report was identical (but for the file name)")


if __name__ == "__main__":
    main()
