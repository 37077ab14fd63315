#!/usr/bin/env python3
"""The profiler's cost per allocation+free pair, measured inside one process: runs bench/pairs_ab (recording
switched on and off in ABBA blocks, call site DEPTH frames below main) under each backend, and prints one table
of paired on/off ratios (median, with the middle half of the block pairs). Optionally the same under another
build's profiler (--baseline: the `before:` columns; the same bench binary) and with GMT_UNWIND=libunwind (the
stack walk before unwind/fast_unwind.h), or with any other library setting (--env NAME=VALUE, e.g.
GMT_EVENT_CLOCK=monotonic). Needs a GPU.

"Off" still runs the hooks' pass-through (a guard check); under cupti, CUPTI's driver callbacks are switched off
while paused, so the ratio includes CUPTI's own dispatch.
bench/overhead.py gives the cross-process ratios to raw (much noisier on the GPU machines).

Usage: bench/pairs_ab.py BUILD_DIR [--baseline OTHER_BUILD_DIR] [--libunwind] [--no-stacks] [--env NAME=VALUE ...]
                         [--backends cupti,hooks,runtime] [--blocks N] [--pairs N] [--depth D] [--rounds R]
                         [--per-round] [--smoke]
--smoke: no GPU needed (the simulated runtime); one tiny run that checks every case is printed and that the trace
holds exactly the allocations of the on blocks; no timing is judged (CI).
"""
import argparse
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile

LINE = re.compile(r"^(.*): on ([0-9.]+) ns, off ([0-9.]+) ns, ratio ([0-9.]+) \(.*middle half ([0-9.]+)-([0-9.]+);")


def run(cli, bench, backend, trace, args, env_extra, options):
    env = dict(os.environ, **env_extra)
    backend_option = ["--backend", backend] if backend else []
    command = [cli, "run", "-q", "--no-symbolize", *backend_option, *options, "-o", trace, "--", bench, *args]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"pairs_ab.py: {' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    rows = {}
    for line in result.stdout.splitlines():
        m = LINE.match(line)
        if m:
            rows[m.group(1)] = tuple(float(m.group(i)) for i in range(2, 7))
    if not rows:
        sys.exit(f"pairs_ab.py: no figures from {' '.join(command)}:\n{result.stdout}")
    return rows


def expected_recording(blocks, pairs):
    """What a run of bench/pairs_ab with recording on must hold: the allocations of its on blocks per API, and its
    pauses. Per case: 4 warm-up blocks (on, off, on, off), then BLOCKS blocks half of them on, one pause per ABBA
    quartet. Three cudaMallocAsync cases (the third on 8 threads at once, an eighth of the pairs each) and two
    cudaMalloc ones, whose blocks have a quarter of the pairs."""
    on_blocks = 2 + blocks // 2
    allocations = {"cudaMallocAsync": 3 * on_blocks * pairs, "cudaMalloc": 2 * on_blocks * (pairs // 4)}
    return allocations, 5 * (2 + blocks // 4)


def smoke(build):
    """Every case prints its line, and the trace holds the on blocks' allocations exactly (pauses lose nothing
    and record nothing, also with 8 threads at once)."""
    blocks, pairs = 8, 256
    cli = os.path.join(build, "bin", "gpumemtrace")
    bench = os.path.join(build, "bench", "pairs_ab")
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "smoke.db")
        rows = run(cli, bench, None, trace, [str(blocks), str(pairs), "3"], {}, ["--simulate"])
        db = sqlite3.connect(trace)
        allocations = dict(db.execute("SELECT a.name, count(*) FROM events e JOIN apis a ON a.id = e.api "
                                      "WHERE e.kind = 1 GROUP BY a.name"))
        pauses = int(db.execute("SELECT value FROM meta WHERE key = 'recording_pauses'").fetchone()[0])
        db.close()
    expected, expected_pauses = expected_recording(blocks, pairs)
    problems = []
    if len(rows) != 5 or not any(case.startswith("8 threads") for case in rows):
        problems.append(f"expected 5 cases, one on 8 threads: {sorted(rows)}")
    if allocations != expected:
        problems.append(f"allocations recorded {allocations}, expected {expected}")
    if pauses != expected_pauses:
        problems.append(f"recording_pauses {pauses}, expected {expected_pauses}")
    if problems:
        sys.exit("pairs_ab.py --smoke: " + "; ".join(problems))
    print(f"pairs_ab smoke: {len(rows)} cases, {sum(allocations.values())} allocations recorded as expected")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("--baseline")
    parser.add_argument("--libunwind", action="store_true")
    parser.add_argument("--no-stacks", action="store_true", help="also each backend with --no-stacks")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="also each backend with this variable set (a column per --env)")
    parser.add_argument("--backends", default="cupti,hooks,runtime")
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--per-round", action="store_true",
                        help="also each round's ratio, per case and column (how far the rounds' medians spread)")
    a = parser.parse_args()
    if a.smoke:
        smoke(a.build)
        return
    bench = os.path.join(a.build, "bench", "pairs_ab")
    configs = []  # (label, backend, cli, env, options)
    cli = os.path.join(a.build, "bin", "gpumemtrace")
    for backend in a.backends.split(","):
        configs.append((backend, backend, cli, {}, []))
        if a.no_stacks:
            configs.append((f"{backend}, no stacks", backend, cli, {}, ["--no-stacks"]))
        if a.libunwind:
            configs.append((f"{backend}, libunwind", backend, cli, {"GMT_UNWIND": "libunwind"}, []))
        for setting in a.env:
            name, _, value = setting.partition("=")
            configs.append((f"{backend}, {setting}", backend, cli, {name: value}, []))
        if a.baseline:
            configs.append((f"before: {backend}", backend, os.path.join(a.baseline, "bin", "gpumemtrace"), {}, []))
    args = [str(a.blocks), str(a.pairs), str(a.depth)]
    results = {label: [] for label, *_ in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for i, (label, backend, profiler, env, options) in enumerate(configs):
                trace = os.path.join(tmp, f"r{r}-{i}.db")
                results[label].append(run(profiler, bench, backend, trace, args, env, options))
    cases = list(results[configs[0][0]][0])
    print(f"pairs_ab: {a.blocks} blocks per case (ABBA), {a.pairs} pairs per block (cudaMalloc: a quarter), "
          f"call site {a.depth} frames below main, {a.rounds} round(s); cells: on/off ratio, median over the "
          f"block pairs (middle half), on-block ns per pair")
    print("| case | " + " | ".join(label for label, *_ in configs) + " |")
    print("|---" * (len(configs) + 1) + "|")
    for case in cases:
        cells = []
        for label, *_ in configs:
            runs = [res[case] for res in results[label]]
            ratio = statistics.median(x[2] for x in runs)
            low = statistics.median(x[3] for x in runs)
            high = statistics.median(x[4] for x in runs)
            on_ns = statistics.median(x[0] for x in runs)
            cells.append(f"{ratio:.3f}x ({low:.3f}-{high:.3f}), {on_ns:.0f} ns")
        print(f"| {case} | " + " | ".join(cells) + " |")
    if a.per_round:
        print("\nEach round's ratio, sorted (the table's cell is their median):")
        for case in cases:
            for label, *_ in configs:
                ratios = sorted(res[case][2] for res in results[label])
                print(f"- {case}, {label}: " + ", ".join(f"{r:.3f}" for r in ratios) +
                      f" (range {ratios[-1] - ratios[0]:.3f})")


if __name__ == "__main__":
    main()
