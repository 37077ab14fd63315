#!/usr/bin/env python3
"""What the profiler costs a real PyTorch job: a training step and an inference step of a 6-layer transformer
encoder, raw and under `gpumemtrace run` (cupti, hooks), and, as the peer, with PyTorch's own allocation
recorder (torch.cuda.memory._record_memory_history). Needs a GPU and torch (the H200 machine's python3).

Why the design: step times of fresh processes differ by 10-30% on these machines (CPU placement, clocks), far
more than the 0.5% to be shown. So
- every process pins itself to the same two cores and times many steps after a warm-up (median per process);
- configurations run as adjacent pairs (raw, profiled, raw, profiled ...) in rotating order, and the cost is
  the median over rounds of the per-round ratio profiled/raw, with its min-max (paired: slow drifts cancel);
- the profiled runs' traces say how much work the profiler did per step: the events recorded inside the timed
  "train step" NVTX ranges; with the per-event cost from bench/overhead.py this bounds the cost from below the
  noise (events per step x cost per event / step time).

Usage:
  bench/torch_step.py BUILD_DIR [rounds=5] [--steps N] [--batch B] [--configs cupti,hooks,recorder]
                                                                     the table (docs/benchmarks.md)
  bench/torch_step.py --worker [--steps N] [--batch B] [--record-history]   one process: one JSON line
"""
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

PINNED_CORES = {2, 3}


def pin_to_cores():
    try:
        os.sched_setaffinity(0, PINNED_CORES & os.sched_getaffinity(0) or os.sched_getaffinity(0))
    except OSError:
        pass


def build_steps(batch_size, host_done=None):
    """The model, its optimizer and a batch on the GPU; returns (train_step, infer_step), each one synchronized
    step inside an NVTX range ("train step", "inference"). `host_done`: a list that gets each step's
    time.perf_counter() when the host has issued all its work, just before it waits for the GPU."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    device = torch.device("cuda")
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=6).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(batch_size, 256, 512, device=device)

    def train_step():
        torch.cuda.nvtx.range_push("train step")
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        if host_done is not None:
            host_done.append(time.perf_counter())
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()

    def infer_step():
        torch.cuda.nvtx.range_push("inference")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(batch)
        if host_done is not None:
            host_done.append(time.perf_counter())
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()

    return train_step, infer_step


def worker(steps, batch_size, record_history):
    pin_to_cores()
    import torch

    train_step, infer_step = build_steps(batch_size)
    if record_history:
        torch.cuda.memory._record_memory_history(max_entries=100000)

    def timed(step, count):
        times = []
        for _ in range(count):
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        return times

    timed(train_step, 20)  # warm-up: the caching allocator fills, kernels are chosen
    train = timed(train_step, steps)
    timed(infer_step, 10)
    infer = timed(infer_step, steps)
    print(json.dumps({"train_ms": statistics.median(train) * 1e3, "infer_ms": statistics.median(infer) * 1e3,
                      "timed_train_steps": steps}))


def run_config(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    last = [line for line in result.stdout.splitlines() if line.startswith("{")][-1]
    return json.loads(last)


TENSOR_BLOCK = 6  # memory_kinds.id of a framework's tensor block (schema/trace_schema.h, MemoryKind::TensorBlock)


def events_per_train_step(trace, timed_steps, range_name="train step", tensor_blocks_only=False):
    """Events the profiler recorded inside the last `timed_steps` "train step" ranges (the timed ones; or those named
    `range_name`: "inference"), per step, and NVTX range rows per step: the profiler's whole work during a
    steady-state step. `tensor_blocks_only`: the tensor block events per step, in the last `timed_steps` ranges that
    hold any: where only the tensor blocks are switched off and on, the ranges are recorded in both arms, and a
    range of an off block holds none."""
    db = sqlite3.connect(trace)
    try:
        spans = db.execute(
            "SELECT r.start_ns, r.end_ns FROM ranges r JOIN strings s ON s.id = r.name_id "
            "WHERE s.text = ? AND r.end_ns IS NOT NULL ORDER BY r.start_ns", (range_name,)).fetchall()
        if tensor_blocks_only:
            counts = [db.execute("SELECT count(*) FROM events WHERE memory_kind = ? AND time_ns BETWEEN ? AND ?",
                                 (TENSOR_BLOCK, *span)).fetchone()[0] for span in spans]
            counts = [count for count in counts if count > 0][-timed_steps:]
        else:
            counts = [db.execute("SELECT count(*) FROM events WHERE time_ns BETWEEN ? AND ?", span).fetchone()[0]
                      for span in spans[-timed_steps:]]
        return sum(counts) / len(counts) if counts else None
    finally:
        db.close()


def main():
    args = sys.argv[1:]
    steps = int(args[args.index("--steps") + 1]) if "--steps" in args else 200
    batch = int(args[args.index("--batch") + 1]) if "--batch" in args else 64
    if "--worker" in args:
        worker(steps, batch, "--record-history" in args)
        return
    build = args[0]
    rounds = int(args[1]) if len(args) > 1 and args[1].isdigit() else 5
    cli = os.path.join(build, "bin", "gpumemtrace")
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(steps), "--batch", str(batch)]
    profiled = {
        "gpumemtrace cupti": lambda trace: [cli, "run", "-q", "--no-symbolize", "--backend", "cupti", "-o", trace,
                                            "--", *me],
        "gpumemtrace hooks": lambda trace: [cli, "run", "-q", "--no-symbolize", "--backend", "hooks", "-o", trace,
                                            "--", *me],
        "PyTorch recorder": lambda trace: [*me, "--record-history"],
    }
    if "--configs" in args:
        wanted = args[args.index("--configs") + 1].split(",")
        profiled = {name: command for name, command in profiled.items() if name.split()[-1] in wanted}
    ratios = {name: {"train_ms": [], "infer_ms": []} for name in profiled}
    raw_times = {"train_ms": [], "infer_ms": []}
    events = {name: [] for name in profiled}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            names = list(profiled)
            names = names[r % len(names):] + names[:r % len(names)]  # rotate which profiler runs first
            for name in names:
                trace = os.path.join(tmp, f"{name.split()[-1]}{r}.db")
                raw = run_config(me)
                measured = run_config(profiled[name](trace))
                for key in ("train_ms", "infer_ms"):
                    raw_times[key].append(raw[key])
                    ratios[name][key].append(measured[key] / raw[key])
                if os.path.exists(trace):
                    per_step = events_per_train_step(trace, measured["timed_train_steps"])
                    if per_step is not None:
                        events[name].append(per_step)
                    os.unlink(trace)
    print(f"6-layer transformer encoder (d_model 512, batch {batch} x 256 tokens, bf16 autocast), {steps} steps "
          f"per process after warm-up, pinned to cores {sorted(PINNED_CORES)}; {rounds} rounds of adjacent "
          "(raw, profiled) pairs; cost = median of the per-pair ratios (min..max)")
    print(f"raw: train step {statistics.median(raw_times['train_ms']):.3f} ms "
          f"({min(raw_times['train_ms']):.3f}-{max(raw_times['train_ms']):.3f}), inference step "
          f"{statistics.median(raw_times['infer_ms']):.3f} ms "
          f"({min(raw_times['infer_ms']):.3f}-{max(raw_times['infer_ms']):.3f}) over {len(raw_times['train_ms'])} raw processes")
    print(f"{'configuration':20} {'train step cost':>30} {'inference step cost':>30} {'events per train step':>22}")
    for name in profiled:
        cells = []
        for key in ("train_ms", "infer_ms"):
            values = [100 * (ratio - 1) for ratio in ratios[name][key]]
            cells.append(f"{statistics.median(values):+6.2f}% ({min(values):+.2f}..{max(values):+.2f})")
        per_step = f"{statistics.median(events[name]):.1f}" if events[name] else "-"
        print(f"{name:20} {cells[0]:>30} {cells[1]:>30} {per_step:>22}")


if __name__ == "__main__":
    main()
