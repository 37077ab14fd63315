#!/usr/bin/env python3
"""Side-by-side cost of the profiler: runs bench/alloc_pairs raw and under `gpumemtrace run` with each backend
(and CUPTI without stacks, and CUPTI with its runtime-API callbacks forced on), interleaved, several rounds,
and prints the median ns per pair of each case, its spread, and the ratio to raw. Device timings move by tens of percent between runs, so only interleaved medians are compared.

Usage: bench/overhead.py BUILD_DIR [rounds=5] [--simulate] [--with-sanitizer]
  --with-sanitizer: also `compute-sanitizer --leak-check full` (the peer; slow), on a GPU only
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def run_once(command, env=None):
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(.*): ([0-9.]+) ns$", out, re.M)}


def main():
    build = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 5
    simulate = ["--simulate"] if "--simulate" in sys.argv else []
    bench = os.path.join(build, "bench", "alloc_pairs")
    cli = os.path.join(build, "bin", "gpumemtrace")
    def profiled(*options):
        return lambda trace: [cli, "run", "-q", "--no-symbolize", *options, *simulate, "-o", trace, "--", bench]

    variants = {"raw": lambda trace: [bench]}
    if simulate:  # the simulated runtime has no driver: only the runtime hooks apply
        variants["runtime"] = profiled()
        variants["runtime, no stacks"] = profiled("--no-stacks")
    else:
        for backend in ("cupti", "hooks", "runtime"):
            variants[backend] = profiled("--backend", backend)
        variants["cupti, no stacks"] = profiled("--backend", "cupti", "--no-stacks")
        # CUPTI's runtime-API callbacks kept on throughout (the behaviour before cupti/runtime_naming.h), to
        # see what switching them off saves in the same interleaved run.
        variants["cupti, runtime callbacks"] = lambda trace: ["env", "GMT_CUPTI_RUNTIME_CALLBACKS=1",
                                                              *profiled("--backend", "cupti")(trace)]
        if "--with-sanitizer" in sys.argv:
            sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
            variants["compute-sanitizer"] = lambda trace: [sanitizer, "--leak-check", "full", bench]
    env = dict(os.environ)
    if simulate:
        env["LD_LIBRARY_PATH"] = os.path.join(build, "lib", "gpumemtrace", "sim")
        env["GMT_SIM_QUIET"] = "1"
    samples = {name: {} for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for index, (name, command) in enumerate(variants.items()):
                trace = os.path.join(tmp, f"round{r}-variant{index}.db")
                raw_env = name in ("raw", "compute-sanitizer")
                for case, ns in run_once(command(trace), env=env if raw_env else None).items():
                    samples[name].setdefault(case, []).append(ns)
    cases = list(samples["raw"])
    print(f"{'case':38} " + " ".join(f"{name:>26}" for name in variants))
    for case in cases:
        raw = statistics.median(samples["raw"][case])
        cells = []
        for name in variants:
            values = samples[name][case]
            median = statistics.median(values)
            spread = (max(values) - min(values)) / median * 100 if median else 0
            ratio = median / raw if raw else 0
            cells.append(f"{median:8.0f} ns ±{spread:3.0f}% {ratio:5.2f}x")
        print(f"{case:38} " + " ".join(f"{c:>26}" for c in cells))
    print(f"(median of {rounds} interleaved rounds; ±: (max-min)/median; x: ratio to raw)")


if __name__ == "__main__":
    main()
