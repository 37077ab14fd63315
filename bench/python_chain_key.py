#!/usr/bin/env python3
"""What a tensor block event in a deep Python chain costs the recorder, phase by phase, as the trace states it.

A worker (this script with --worker) makes DEPTH distinct Python functions, each calling the next (each its own
code object, as a real chain has), and the innermost hands EVENTS tensor blocks to the recorder through the entry
point PyTorch's bridge uses (gmt_torch_allocator_action, recorder/framework_blocks.h), under `gpumemtrace run
--simulate`; optionally it overwrites a buffer of EVICT bytes between events, as an app's own work evicts our data
from the caches. No PyTorch and no GPU needed: any CPython, e.g. a 3.12 one to take the code watcher's key
(python/gpumemtrace_inprocess/code_watch.py).

Each build runs ROUNDS times, interleaved with the others; the build given first also runs a second time as an A/A
control column. Printed per column: the medians over the rounds of the recorder's own ns per block event (meta
self_cost_block_ns_per_event) and of each of its phases (meta self_cost_block_phase_ns), min-max beside.

Usage: bench/python_chain_key.py BUILD_DIR [--baseline OTHER_BUILD_DIR] [--python PY] [--depth 30] [--events 20000]
                                 [--evict BYTES] [--rounds 5] [--smoke]
--smoke: 2000 events, one round (CTest label bench-smoke); the same checks (every block recorded with its stack, the
phases stated), no timing judged.
"""
import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile

import benchlib

PHASES = ("walk", "python_key", "memo", "python_merge", "stack_id", "append")  # meta self_cost_block_phase_ns's parts


def worker(depth, events, evict):
    import ctypes
    library = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    action = library.gmt_torch_allocator_action
    action.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    action.restype = None
    alloc, free_completed = 1, 3  # GMT_TORCH_ALLOC, GMT_TORCH_FREE_COMPLETED
    scratch = bytearray(evict)
    fills = (bytes(evict), b"\1" * evict)

    def leaf(i):
        address = 0x10000000 + (i % 64) * 4096
        action(alloc, 0, address, 512, 0)
        action(free_completed, 0, address, 512, 0)

    namespace = {"leaf": leaf}
    source = "def f0(i):\n    return leaf(i)\n" + "".join(
        f"def f{d}(i):\n    return f{d - 1}(i)\n" for d in range(1, depth + 1))
    exec(compile(source, "python_chain_key_app", "exec"), namespace)
    outermost = namespace[f"f{depth}"]
    for i in range(events):
        if evict:
            scratch[:] = fills[i % 2]
        outermost(i)


def measure(build, python, depth, events, evict, trace):
    command = [benchlib.paths(build)["cli"], "run", "-q", "--simulate", "--no-symbolize", "-o", trace, "--",
               python, os.path.abspath(__file__), "--worker", str(depth), str(events), str(evict)]
    subprocess.run(command, check=True, capture_output=True, text=True, env=dict(os.environ, GMT_SIM_QUIET="1"))
    with sqlite3.connect(trace) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
        blocks = db.execute("SELECT count(*), count(NULLIF(stack_id, 0)) FROM events WHERE memory_kind = 6 "
                            "AND kind = 1").fetchone()
    os.remove(trace)
    if blocks != (events, events):
        sys.exit(f"{build}: {blocks[0]} block allocations, {blocks[1]} with a stack; expected {events} each")
    if "self_cost_block_phase_ns" not in meta:
        sys.exit(f"{build}: the trace states no phases of its own time (meta self_cost_block_phase_ns)")
    phases = dict(part.split("=") for part in meta["self_cost_block_phase_ns"].split(","))
    return {"total": float(meta["self_cost_block_ns_per_event"]), "watcher": "python_code_watcher" in meta,
            **{part: float(phases.get(part, 0)) for part in PHASES}}  # no memo= before 2026-12-07: in python_key


def main():
    if sys.argv[1:2] == ["--worker"]:  # --worker DEPTH EVENTS EVICT, as measure() starts it
        worker(*(int(arg) for arg in sys.argv[2:5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("--baseline")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--evict", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.rounds = 2000, 1
    columns = [("build", args.build), ("build again (A/A)", args.build)]
    if args.baseline:
        columns.append(("baseline", args.baseline))
    samples = {name: [] for name, _ in columns}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, build in columns:
                trace = os.path.join(tmp, f"round{r}.db")
                samples[name].append(measure(build, args.python, args.depth, args.events, args.evict, trace))
    watcher = {name: all(s["watcher"] for s in runs) for name, runs in samples.items()}
    print(f"python_chain_key: {args.events} tensor blocks at the end of a chain of {args.depth} distinct Python "
          f"functions ({args.python}), {args.evict} bytes overwritten between events, {args.rounds} rounds "
          f"interleaved; the recorder's own ns per block event as the trace states it, median (min-max)")
    rows = []
    for part in ("total", *PHASES):
        rows.append([part] + [benchlib.spread([s[part] for s in samples[name]], "{:.0f}") + " ns"
                              for name, _ in columns])
    rows.append(["code watcher"] + ["on" if watcher[name] else "off" for name, _ in columns])
    benchlib.print_table(["phase"] + [name for name, _ in columns], rows)


if __name__ == "__main__":
    main()
