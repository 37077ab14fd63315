#!/usr/bin/env python3
"""What recording PyTorch's tensors costs per tensor, measured inside one profiled process as bench/torch_step_ab.py
measures a step: a torch.empty + del pair (256 B and 1 MiB, served from the cache: no kernel, no cudaMalloc) timed
in ABBA blocks in three arms:
  on      everything recording, as by default (the block with its stack and Python frames);
  cuda    PyTorch's blocks paused (gmt_set_torch_blocks_paused), the CUDA level recording: what the pair costs
          without block tracking;
  paused  all recording paused (gmt_set_recording_paused): what remains is PyTorch's call into our tracker and its
          early return, about what the pair costs unprofiled (the raw process's figure is printed beside it).
The figure is the ratio of each arm's pair time to the paused arm's, per adjacent block pair: median, mean and 95%
interval. Then the sustained rate: one thread allocating and freeing 256 B tensors for about two seconds inside an
NVTX range; the trace says how many block events were recorded in it per second and how many were dropped (meta
dropped_events must stay 0).

Usage:
  bench/torch_blocks.py BUILD_DIR [--blocks N=24] [--pairs K=5000]
  bench/torch_blocks.py --worker [--blocks N] [--pairs K] [--raw]     one process: one JSON line
"""
import ctypes
import json
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import pin_to_cores  # noqa: E402  (the same pinning as the step benchmarks)

SIZES = (256, 1 << 20)
ARMS = ("on", "cuda", "paused")
SUSTAINED_S = 2.0
TORCH_ALLOCATOR = 4  # schema Source::TorchAllocator


def controls():
    library = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    pause_all, pause_blocks = library.gmt_set_recording_paused, library.gmt_set_torch_blocks_paused
    for fn in (pause_all, pause_blocks):
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int

    def set_arm(arm):
        pause_blocks(1 if arm == "cuda" else 0)
        pause_all(1 if arm == "paused" else 0)
    return set_arm


def pair_us(torch, size, pairs):
    start = time.perf_counter()
    for _ in range(pairs):
        t = torch.empty(size, dtype=torch.uint8, device="cuda")
        del t
    return (time.perf_counter() - start) / pairs * 1e6


def summary(ratios):
    mean = statistics.fmean(ratios)
    half = 1.96 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
    return {"median": statistics.median(ratios), "mean": mean, "ci95": half}


def worker(blocks, pairs, raw):
    pin_to_cores()
    import torch

    for size in SIZES:
        pair_us(torch, size, 2000)  # warm: the cache holds a block of each size
    result = {"raw": raw}
    if raw:
        for size in SIZES:
            result[str(size)] = {"raw_us": statistics.median(pair_us(torch, size, pairs) for _ in range(blocks))}
        print(json.dumps(result), flush=True)
        return
    set_arm = controls()
    for size in SIZES:
        times = {arm: [] for arm in ARMS}
        for block in range(blocks):
            order = ARMS if block % 2 == 0 else tuple(reversed(ARMS))  # ABC CBA: a linear drift cancels
            for arm in order:
                set_arm(arm)
                pair_us(torch, size, 200)  # untimed: the switch itself is not in the block
                times[arm].append(pair_us(torch, size, pairs))
        set_arm("on")
        result[str(size)] = {
            "paused_us": statistics.median(times["paused"]),
            **{arm: summary([a / p for a, p in zip(times[arm], times["paused"])]) for arm in ("on", "cuda")},
        }
    # Sustained: as fast as one thread can, inside a range the parent finds in the trace.
    torch.cuda.nvtx.range_push("sustained")
    count, deadline = 0, time.perf_counter() + SUSTAINED_S
    while time.perf_counter() < deadline:
        for _ in range(1000):
            t = torch.empty(256, dtype=torch.uint8, device="cuda")
            del t
        count += 1000
    torch.cuda.nvtx.range_pop()
    result["sustained_pairs"] = count
    print(json.dumps(result), flush=True)


def sustained(trace):
    with sqlite3.connect(trace) as db:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        span = db.execute("SELECT r.start_ns, r.end_ns FROM ranges r JOIN strings s ON s.id = r.name_id "
                          "WHERE s.text = 'sustained'").fetchone()
        events = db.execute("SELECT count(*) FROM events WHERE source = ? AND time_ns BETWEEN ? AND ?",
                            (TORCH_ALLOCATOR, *span)).fetchone()[0]
    return events / ((span[1] - span[0]) / 1e9), int(meta.get("dropped_events", "0")), events


def option(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def run_worker(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(lines[-1])


def main():
    args = sys.argv[1:]
    blocks, pairs = option(args, "--blocks", 24), option(args, "--pairs", 5000)
    if "--worker" in args:
        worker(blocks, pairs, "--raw" in args)
        return
    if not args or args[0].startswith("--"):
        raise SystemExit(__doc__)
    cli = os.path.join(args[0], "bin", "gpumemtrace")
    me = [sys.executable, os.path.abspath(__file__), "--blocks", str(blocks), "--pairs", str(pairs), "--worker"]
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "blocks.db")
        raw = run_worker([*me, "--raw"])
        profiled = run_worker([cli, "run", "-q", "--no-symbolize", "--backend", "hooks", "-o", trace, "--", *me])
        rate, dropped, events = sustained(trace)
    print(f"torch.empty + del from the cache, one process, {blocks} ABC/CBA blocks of {pairs} pairs per arm; ratio "
          f"to the paused arm (median, mean +- 95% interval); raw: a process without the profiler")
    print(f"{'size':>8} {'raw':>9} {'paused':>9} {'on (blocks + CUDA level)':>30} {'cuda (blocks paused)':>28}")
    for size in SIZES:
        r, p = raw[str(size)], profiled[str(size)]
        on, cuda = p["on"], p["cuda"]
        print(f"{size:>8} {r['raw_us']:7.2f}us {p['paused_us']:7.2f}us "
              f"{on['median']:8.3f}x {on['mean']:7.3f}+-{on['ci95']:.3f}x {cuda['median']:8.3f}x "
              f"{cuda['mean']:7.3f}+-{cuda['ci95']:.3f}x")
    print(f"sustained, one thread: {rate:,.0f} block events/s recorded ({events} in the range), dropped {dropped}")


if __name__ == "__main__":
    main()
