#!/usr/bin/env python3
"""The host cost of a tensor block event in PyTorch's real stacks, measured on a machine without a GPU.

On the GPU, PyTorch's caching allocator calls our trace tracker (python/gpumemtrace_inprocess/torch_bridge.cpp),
which forwards every block to gmt_torch_allocator_action with the allocating thread's stack: autograd's and the
dispatcher's deep native stacks under the model's Python frames. Here a CPU allocator that wraps PyTorch's own
forwards each CPU tensor to the same entry point, so the same recorder code takes the same kind of stacks (torch's
dispatcher, autograd's engine, the model's Python frames), under `gpumemtrace run --simulate`. It is a stand-in
for the GPU measurement (bench/torch_step_ab.py), for working on the stack capture without a GPU; the figures that
count are the GPU's.

One process per configuration; inside it, the recording of blocks is switched on and off in ABBA blocks of steps
(gmt_set_torch_blocks_paused), and each block's median step is taken: the cost per block event is
(on - off) / block events per step. An A/A control switches nothing.

Usage: bench/torch_cpu_blocks.py BUILD_DIR [--python PY] [--blocks N=24] [--block-steps K=10] [--configs ...]
       configs: control, blocks (default both), blocks-cut (blocks with GMT_STACK_CUT=1: memo answers checked up
       to the eval loop only), blocks-native (GMT_NO_PYTHON_FRAMES=1: native frames only), blocks-nostacks
       (`run --no-stacks`), blocks-python (GMT_BLOCK_STACKS=python: Python frames only), blocks-sampled
       (`run --sample-block-stacks 1MiB`); needs torch (CPU is enough) and a C++ compiler.
Each configuration also prints the recorder's own time per block event as it measured itself (the trace's meta
self_cost_block_ns_per_event and its phases) and how many stored walks answered to the cut.
"""
import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ALLOCATOR_SOURCE = r"""
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <cstdint>
#include <cstring>

namespace {
using RecordFn = void (*)(int action, int device, uint64_t address, uint64_t size, uint64_t stream);
RecordFn g_record = nullptr;
c10::Allocator* g_inner = nullptr;
uint64_t g_blocks = 0;

struct Block {
  c10::DataPtr inner;
};

void delete_block(void* context) {
  auto* block = static_cast<Block*>(context);
  g_record(3, 0, reinterpret_cast<uint64_t>(block->inner.get()), 0, 0);  // GMT_TORCH_FREE_COMPLETED
  delete block;
}

// PyTorch's CPU allocator with every block forwarded as the CUDA bridge forwards its tracker's actions.
struct ForwardingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = g_inner->allocate(n);
    if (n == 0 || inner.get() == nullptr) return inner;
    void* data = inner.get();
    ++g_blocks;
    g_record(1, 0, reinterpret_cast<uint64_t>(data), n, 0);  // GMT_TORCH_ALLOC
    return {data, new Block{std::move(inner)}, &delete_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};
ForwardingAllocator g_forwarding;
}  // namespace

void install(int64_t record) {
  g_record = reinterpret_cast<RecordFn>(record);
  g_inner = c10::GetCPUAllocator();
  c10::SetCPUAllocator(&g_forwarding, /*priority=*/100);
}
int64_t blocks() { return static_cast<int64_t>(g_blocks); }
"""

WARM_UP_STEPS = 10


def build_model(torch):
    from torch import nn

    torch.manual_seed(0)
    torch.set_num_threads(1)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(2, 16, 64)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()

    def infer_step():
        with torch.no_grad():
            model(batch)

    return train_step, infer_step


def thread_cpu_seconds():
    """CPU seconds (user + system) of each thread of this process so far, by thread id."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            seconds[tid] = (int(fields[11]) + int(fields[12])) / ticks
        except OSError:
            pass
    return seconds


def worker(mode, blocks, block_steps):
    import ctypes

    import torch
    from torch.utils.cpp_extension import load_inline

    library = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    record = ctypes.cast(library.gmt_torch_allocator_action, ctypes.c_void_p).value
    set_paused = library.gmt_set_torch_blocks_paused
    set_paused.argtypes, set_paused.restype = [ctypes.c_int], ctypes.c_int
    cache = os.path.join(tempfile.gettempdir(), f"gmt-cpu-blocks-{torch.__version__}")
    os.makedirs(cache, exist_ok=True)
    extension = load_inline("gmt_cpu_blocks", cpp_sources=ALLOCATOR_SOURCE, functions=["install", "blocks"],
                            build_directory=cache, extra_cflags=["-O2"])
    extension.install(record)
    train_step, infer_step = build_model(torch)
    result = {"mode": mode}
    for name, step in (("train", train_step), ("infer", infer_step)):
        for _ in range(WARM_UP_STEPS):
            step()
        before = extension.blocks()
        step()
        per_step = extension.blocks() - before
        on_ms, off_ms = [], []
        arm_log = open(os.environ["GMT_BENCH_ARM_LOG"], "a") if os.environ.get("GMT_BENCH_ARM_LOG") else None
        for block in range(blocks):
            on = block % 4 in (0, 3)  # ABBA
            if mode != "control":
                set_paused(0 if on else 1)
            step()
            times = []
            block_start = time.monotonic_ns()
            for _ in range(block_steps):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
            if arm_log:  # each timed block's CLOCK_MONOTONIC span and arm, for a profile split by arm
                arm_log.write(f"{name} {block_start} {time.monotonic_ns()} {int(on)} {block_steps} {os.getpid()}\n")
                arm_log.flush()
            (on_ms if on else off_ms).append(statistics.median(times) * 1e3)
        if arm_log:
            arm_log.close()
        set_paused(0)
        costs = [on - off for on, off in zip(on_ms, off_ms)]
        result[name + "_threads_cpu_s"] = thread_cpu_seconds()
        result[name] = {"off_ms": statistics.median(off_ms), "on_ms": statistics.median(on_ms),
                        "allocations_per_step": per_step,
                        "us_per_block_event": 1e3 * statistics.median(costs) / (2 * per_step),
                        "cost_percent": 100.0 * statistics.median(costs) / statistics.median(off_ms)}
    print(json.dumps(result), flush=True)


# Per configuration: its environment and `run`'s options. The last two price the stack's parts: without Python
# frames (native frames only), and without any stack (what a block event costs apart from its stack).
CONFIGS = {
    "control": ({}, []),
    "blocks": ({}, []),
    "blocks-cut": ({"GMT_STACK_CUT": "1"}, []),
    "blocks-native": ({"GMT_NO_PYTHON_FRAMES": "1"}, []),
    "blocks-nostacks": ({}, ["--no-stacks"]),
    "blocks-python": ({"GMT_BLOCK_STACKS": "python"}, []),  # Python frames only, no native walk (an experiment)
    # Stacks sampled (run --sample-block-stacks): blocks of 1 MiB or more all take theirs, smaller ones one per MiB.
    "blocks-sampled": ({}, ["--sample-block-stacks", "1MiB"]),
}


def recorder_meta(trace):
    """What the recorder said of its own cost and its stack walks (the trace's meta), for the figures' lines."""
    keys = ("self_cost_block_ns_per_event", "self_cost_block_phase_ns", "stack_walks_counted",
            "stack_walks_stored", "stack_walks_to_the_cut", "stack_walk_word_checks", "stack_walks_evicted",
            "stack_memo_hits")
    with sqlite3.connect(trace) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        # The tensor allocations that took a stack (all of them unless run --sample-block-stacks).
        with_stack, allocations = db.execute("SELECT sum(stack_id != 0), count(*) FROM events WHERE source = 4 "
                                             "AND kind = 1").fetchone()
    figures = {key: meta.get(key, "-") for key in keys}
    figures["tensor_allocations_with_a_stack"] = f"{with_stack or 0}/{allocations}"
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--block-steps", type=int, default=10)
    parser.add_argument("--configs", default="control,blocks")
    parser.add_argument("--keep", help="keep the traces in this folder")
    parser.add_argument("--worker")
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.blocks, args.block_steps)
    gpumemtrace = os.path.join(args.build, "bin", "gpumemtrace")
    folder = args.keep or tempfile.mkdtemp(prefix="gmt-cpu-blocks-")
    os.makedirs(folder, exist_ok=True)
    try:
        run_configs(args, gpumemtrace, folder)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def run_configs(args, gpumemtrace, folder):
    print(f"block events in PyTorch's CPU stacks, {args.blocks} ABBA blocks of {args.block_steps} steps")
    for config in args.configs.split(","):
        if config not in CONFIGS:
            raise SystemExit(f"unknown configuration {config!r}: {', '.join(CONFIGS)}")
        environment, run_options = CONFIGS[config]
        trace = os.path.join(folder, f"{config}.db")
        command = [gpumemtrace, "run", "--simulate", "-q", *run_options, "-o", trace, "--", args.python,
                   os.path.abspath(__file__),
                   args.build, "--worker", config, "--blocks", str(args.blocks), "--block-steps",
                   str(args.block_steps)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=1800,
                              env=dict(os.environ, **environment))
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            raise SystemExit(f"{config}: {' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        result = json.loads(lines[-1])
        for phase in ("train", "infer"):
            r = result[phase]
            print(f"  {config:8s} {phase:5s} off {r['off_ms']:7.3f} ms  on {r['on_ms']:7.3f} ms  "
                  f"{r['cost_percent']:+6.2f}%  {r['allocations_per_step']:4d} allocations/step  "
                  f"{r['us_per_block_event']:6.3f} us per block event")
        if config != "control":
            print("  " + config + " recorder: " + ", ".join(f"{k}={v}" for k, v in recorder_meta(trace).items()))


if __name__ == "__main__":
    sys.exit(main())
