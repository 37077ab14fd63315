#!/usr/bin/env python3
"""What the block-level mode (`gpumemtrace run --torch-blocks`) costs against the default run, side by side: the
step time of a 6-layer transformer encoder training step, and the time of one tensor allocation + free (the
per-tensor cost, where PyTorch's own history recorder shows most: +56% in shared/FACTS.md). Needs a GPU and torch
(the H200 machine's python3); the lead engineer runs it for docs/benchmarks.md.

Paired rounds as bench/torch_step.py does (fresh processes differ by 10-30%): each round runs the default and the
block-level configuration back to back, in rotating order, both pinned to the same cores; the cost is the median
over rounds of the per-round ratio blocks/default (min..max). The block-level traces also say how many tensor
blocks a step records and whether PyTorch's ring ever overran (meta tensor_blocks_overruns).

Usage:
  bench/torch_blocks.py BUILD_DIR [rounds=5] [--steps N] [--batch B]
  bench/torch_blocks.py --worker [--steps N] [--batch B]        one process: one JSON line
"""
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_step import build_steps, pin_to_cores, run_config  # noqa: E402  (the same model and pinning)

TENSOR_PAIRS = 20000


def worker(steps, batch_size):
    pin_to_cores()
    import torch

    train_step, _ = build_steps(batch_size)
    device = torch.device("cuda")

    times = []
    for i in range(20 + steps):  # the first 20: warm-up (the caching allocator fills, kernels are chosen)
        torch.cuda.synchronize()
        start = time.perf_counter()
        train_step()
        if i >= 20:
            times.append(time.perf_counter() - start)
    # One tensor allocation + free from the cache (no kernel: torch.empty), the per-tensor cost.
    for _ in range(1000):
        torch.empty(1024, device=device)
    start = time.perf_counter()
    for _ in range(TENSOR_PAIRS):
        t = torch.empty(1024, device=device)
        del t
    pair_us = (time.perf_counter() - start) / TENSOR_PAIRS * 1e6
    print(json.dumps({"train_ms": statistics.median(times) * 1e3, "tensor_pair_us": pair_us, "steps": steps}))


def blocks_in(trace, steps):
    """Tensor blocks recorded per timed train step, and the ring's overruns."""
    db = sqlite3.connect(trace)
    try:
        spans = db.execute("SELECT r.start_ns, r.end_ns FROM ranges r JOIN strings s ON s.id = r.name_id "
                           "WHERE s.text = 'train step' AND r.end_ns IS NOT NULL ORDER BY r.start_ns").fetchall()
        spans = spans[-steps:]
        blocks = sum(db.execute("SELECT count(*) FROM events WHERE source = 4 AND kind = 1 AND time_ns BETWEEN ? "
                                "AND ?", span).fetchone()[0] for span in spans)
        overruns = db.execute("SELECT value FROM meta WHERE key = 'tensor_blocks_overruns'").fetchone()
        return blocks / max(1, len(spans)), int(overruns[0]) if overruns else None
    finally:
        db.close()


def main():
    args = sys.argv[1:]
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 200
    batch = int(args[args.index("--batch") + 1]) if "--batch" in args else 64
    if "--worker" in args:
        worker(steps, batch)
        return
    cli = os.path.join(args[0], "bin", "gpumemtrace")
    rounds = int(args[1]) if len(args) > 1 and args[1].isdigit() else 5
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(steps), "--batch", str(batch)]
    configs = {"default": [], "torch-blocks": ["--torch-blocks"]}
    measured = {name: [] for name in configs}
    per_step, overruns = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            names = list(configs) if r % 2 == 0 else list(reversed(configs))
            for name in names:
                trace = os.path.join(tmp, f"{name}{r}.db")
                measured[name].append(run_config([cli, "run", "-q", "--no-symbolize", *configs[name], "-o", trace,
                                                  "--", *me]))
                if name == "torch-blocks":
                    blocks, lost = blocks_in(trace, steps)
                    per_step.append(blocks)
                    overruns.append(lost)
                os.unlink(trace)
    print(f"6-layer transformer encoder (d_model 512, batch {batch} x 256 tokens, bf16 autocast), {steps} steps per "
          f"process after warm-up; {rounds} rounds of adjacent (default, --torch-blocks) pairs; cost = median of the "
          "per-pair ratios (min..max)")
    for key, label in (("train_ms", "train step"), ("tensor_pair_us", "tensor alloc+free")):
        base = [m[key] for m in measured["default"]]
        ratios = [100 * (b[key] / d[key] - 1) for d, b in zip(measured["default"], measured["torch-blocks"])]
        unit = "ms" if key == "train_ms" else "us"
        print(f"{label:18} default {statistics.median(base):8.3f} {unit}   --torch-blocks "
              f"{statistics.median(ratios):+6.2f}% ({min(ratios):+.2f}..{max(ratios):+.2f})")
    print(f"tensor blocks per train step: {statistics.median(per_step):.1f}; ring overruns: {overruns}")


if __name__ == "__main__":
    main()
