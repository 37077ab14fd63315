#!/usr/bin/env python3
"""What the profiler costs a real PyTorch job: a training step and an inference loop of a 6-layer transformer
encoder, raw and under `gpumemtrace run` (cupti, hooks), and, as the peer, with PyTorch's own allocation
recorder (torch.cuda.memory._record_memory_history). Each configuration is a fresh process; configurations are
interleaved over several rounds, and the table shows each one's median step time, the spread of its per-round
medians, and the ratio to raw. Needs a GPU and torch (the H200 machine's python3).

Usage:
  bench/torch_step.py BUILD_DIR [rounds=3] [--steps N]     the table (docs/benchmarks.md)
  bench/torch_step.py --worker [--steps N] [--record-history]  one process: prints one JSON line of step times
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def worker(steps, record_history):
    import torch
    from torch import nn

    torch.manual_seed(0)
    device = torch.device("cuda")
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=6).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(32, 256, 512, device=device)
    if record_history:
        torch.cuda.memory._record_memory_history(max_entries=100000)

    def train_step():
        torch.cuda.nvtx.range_push("train step")
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch).float().pow(2).mean()
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()

    def infer_step():
        torch.cuda.nvtx.range_push("inference")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(batch)
        torch.cuda.nvtx.range_pop()

    def timed(step, count):
        times = []
        for _ in range(count):
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return times

    timed(train_step, 20)  # warm-up: the caching allocator fills, kernels are chosen
    train = timed(train_step, steps)
    timed(infer_step, 10)
    infer = timed(infer_step, steps)
    print(json.dumps({"train_ms": statistics.median(train) * 1e3, "infer_ms": statistics.median(infer) * 1e3}))


def run_config(command):
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    last = [line for line in result.stdout.splitlines() if line.startswith("{")][-1]
    return json.loads(last)


def main():
    args = sys.argv[1:]
    steps = 100
    if "--steps" in args:
        steps = int(args[args.index("--steps") + 1])
    if "--worker" in args:
        worker(steps, "--record-history" in args)
        return
    build = args[0]
    rounds = int(args[1]) if len(args) > 1 and args[1].isdigit() else 3
    cli = os.path.join(build, "bin", "gpumemtrace")
    me = [sys.executable, os.path.abspath(__file__), "--worker", "--steps", str(steps)]
    with tempfile.TemporaryDirectory() as tmp:
        configs = {
            "raw": lambda r: me,
            "gpumemtrace cupti": lambda r: [cli, "run", "-q", "--no-symbolize", "--backend", "cupti", "-o",
                                            os.path.join(tmp, f"cupti{r}.db"), "--", *me],
            "gpumemtrace hooks": lambda r: [cli, "run", "-q", "--no-symbolize", "--backend", "hooks", "-o",
                                            os.path.join(tmp, f"hooks{r}.db"), "--", *me],
            "PyTorch recorder": lambda r: [*me, "--record-history"],
        }
        results = {name: {"train_ms": [], "infer_ms": []} for name in configs}
        for r in range(rounds):
            for name, command in configs.items():
                for key, value in run_config(command(r)).items():
                    results[name][key].append(value)
    print(f"6-layer transformer encoder (d_model 512, batch 32 x 256 tokens, bf16 autocast), {steps} steps per "
          f"process after warm-up, {rounds} interleaved rounds; median of per-round medians, spread = "
          "(max - min) / median of the per-round medians")
    print(f"{'configuration':22} {'train step':>28} {'inference step':>28}")
    raw = {key: statistics.median(results["raw"][key]) for key in ("train_ms", "infer_ms")}
    for name, values in results.items():
        cells = []
        for key in ("train_ms", "infer_ms"):
            median = statistics.median(values[key])
            spread = (max(values[key]) - min(values[key])) / median * 100
            cells.append(f"{median:7.3f} ms ±{spread:4.1f}% {100 * (median / raw[key] - 1):+6.2f}%")
        print(f"{name:22} {cells[0]:>28} {cells[1]:>28}")


if __name__ == "__main__":
    main()
