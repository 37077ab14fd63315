#!/usr/bin/env python3
"""Symbolization time for STACKS unique call stacks (issue 8: 10k). The trace: an empty trace from
`gpumemtrace run` of a program without CUDA, plus STACKS stacks of DEPTH frames whose pcs are return
addresses inside the functions of a real binary with DWARF (this build's own `gpumemtrace`, recorded as the
trace's one module with its build-id), one allocation event per stack. `gpumemtrace symbolize` then resolves
every distinct pc to function, file and line. Prints wall and CPU seconds, medians over rounds (each round
symbolizes a fresh copy), side by side with a baseline build when given.

Usage: bench/symbolize_speed.py BUILD_DIR [--stacks N] [--depth D] [--rounds R] [--baseline DIR] [--smoke]
"""
import argparse
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


def functions_of(binary):
    """(address, size) of every defined function with a size."""
    out = subprocess.run(["nm", "--defined-only", "-S", binary], capture_output=True, text=True, check=True).stdout
    functions = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in "TtWw" and int(parts[1], 16) > 8:
            functions.append((int(parts[0], 16), int(parts[1], 16)))
    return functions


def build_id_of(binary):
    out = subprocess.run(["readelf", "-n", binary], capture_output=True, text=True, check=True).stdout
    match = re.search(r"Build ID: ([0-9a-f]+)", out)
    return match.group(1) if match else None


def make_trace(cli, path, stacks, depth):
    subprocess.run([cli, "run", "--simulate", "-q", "--no-symbolize", "-o", path, "--", "true"], check=True,
                   capture_output=True)
    binary = os.path.realpath(cli)
    functions = functions_of(binary)
    rng = random.Random(8)
    db = sqlite3.connect(path)
    db.execute("INSERT INTO modules(path, base, size, build_id) VALUES (?1, 0, ?2, ?3)",
               (binary, os.path.getsize(binary) * 4, build_id_of(binary)))
    seen = set()
    for stack_id in range(1, stacks + 1):
        while True:
            frames = []
            for _ in range(depth):
                address, size = rng.choice(functions)
                frames.append(address + rng.randrange(1, size))
            if tuple(frames) not in seen:
                break
        seen.add(tuple(frames))
        db.execute("INSERT INTO stacks(id, depth) VALUES (?1, ?2)", (stack_id, depth))
        db.executemany("INSERT INTO stack_frames(stack_id, level, pc) VALUES (?1, ?2, ?3)",
                       [(stack_id, level, pc) for level, pc in enumerate(frames)])
        db.execute("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, "
                   "size, stack_id, error) VALUES (?1, 1, 1, 1, 1, 1, 0, 0, ?2, 256, ?3, 0)",
                   (stack_id, 0x10000 + 256 * stack_id, stack_id))
    db.execute("DELETE FROM meta WHERE key = 'symbolized'")
    db.commit()
    pcs = db.execute("SELECT count(DISTINCT pc) FROM stack_frames").fetchone()[0]
    db.close()
    return pcs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--stacks", type=int, default=10000)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.stacks, args.rounds = 50, 1
    clis = [("this build", benchlib.paths(args.build)["cli"])]
    if args.baseline:
        clis.append(("baseline", benchlib.paths(args.baseline)["cli"]))
    with tempfile.TemporaryDirectory() as tmp:
        original = os.path.join(tmp, "stacks.db")
        pcs = make_trace(clis[0][1], original, args.stacks, args.depth)
        figures = {name: [] for name, _ in clis}
        for _ in range(args.rounds):
            for name, cli in clis:
                copy = os.path.join(tmp, "copy.db")
                shutil.copyfile(original, copy)
                figures[name].append(benchlib.run_measured([cli, "symbolize", "-q", copy]))
                db = sqlite3.connect(copy)
                named = db.execute("SELECT count(*) FROM symbols WHERE function IS NOT NULL").fetchone()[0]
                lines = db.execute("SELECT count(*) FROM symbols WHERE line IS NOT NULL").fetchone()[0]
                db.close()
                if named < pcs * 0.9:
                    sys.exit(f"only {named} of {pcs} pcs got a function name")
    print(f"symbolize: {args.stacks} unique stacks x {args.depth} frames = {pcs} distinct pcs in "
          f"{os.path.basename(clis[0][1])}; {args.rounds} rounds; load average at the end: {benchlib.load_average()}")
    benchlib.print_table(["case", "wall s", "CPU s", "peak RSS MiB", "CPU us per pc"],
                         [[name, benchlib.spread([r[0] for r in runs]), benchlib.spread([r[1] for r in runs]),
                           benchlib.spread([r[2] for r in runs], "{:.0f}"),
                           f"{sorted(r[1] for r in runs)[len(runs) // 2] / pcs * 1e6:.1f}"]
                          for name, runs in figures.items()])
    print(f"last round: {named} pcs named, {lines} with file and line")


if __name__ == "__main__":
    main()
