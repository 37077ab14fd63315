#!/usr/bin/env python3
"""Cost of Python frames per allocation: tests/python/ctypes_app.py PAIRS DEPTH times cudaMalloc+cudaFree pairs
made through ctypes (GIL released) under the simulated runtime, raw, under `gpumemtrace run` with Python
frames, and with GMT_NO_PYTHON_FRAMES=1; rounds interleaved, medians with min-max (docs/benchmarks.md).

usage: bench/python_frames.py BUILD_DIR [PAIRS] [ROUNDS] [DEPTH ...]
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APP = os.path.join(ROOT, "tests", "python", "ctypes_app.py")


def measure(build, mode, pairs, depth, scratch):
    env = dict(os.environ)
    sim_dir = os.path.join(build, "lib", "gpumemtrace", "sim")
    if mode == "raw":
        env["LD_LIBRARY_PATH"] = sim_dir + ":" + env.get("LD_LIBRARY_PATH", "")
        command = [sys.executable, APP, str(pairs), str(depth)]
    else:
        if mode == "no-python-frames":
            env["GMT_NO_PYTHON_FRAMES"] = "1"
        trace = os.path.join(scratch, f"{mode}.db")
        command = [os.path.join(build, "bin", "gpumemtrace"), "run", "--simulate", "--no-symbolize", "--force",
                   "-o", trace, sys.executable, APP, str(pairs), str(depth)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    wall, cpu = re.search(r"wall_ns_per_pair=(\d+) cpu_ns_per_pair=(\d+)", out).groups()
    return int(wall), int(cpu)


def main():
    build = sys.argv[1]
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    depths = [int(d) for d in sys.argv[4:]] or [1, 30]
    modes = ["raw", "python-frames", "no-python-frames"]
    with tempfile.TemporaryDirectory() as scratch:
        for depth in depths:
            results = {mode: [] for mode in modes}
            for _ in range(rounds):
                for mode in modes:
                    results[mode].append(measure(build, mode, pairs, depth, scratch))
            cells = []
            for mode in modes:
                for i in (0, 1):
                    values = [r[i] for r in results[mode]]
                    cells.append(f"{statistics.median(values):.0f} ns ({min(values)}-{max(values)})")
            print(f"| {pairs:,} | {depth} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
