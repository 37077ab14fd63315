"""Shared by the CPU benchmarks in bench/: running children, reading what they print, and writing medians
with their spread. Timings on the shared 2-core build machine move by tens of percent between runs: every
bench runs its cases interleaved, several rounds, and prints medians with min-max."""
import os
import resource
import sqlite3
import statistics
import subprocess
import time


def paths(build):
    return {
        "cli": os.path.join(build, "bin", "gpumemtrace"),
        "sim": os.path.join(build, "lib", "gpumemtrace", "sim"),
        "flood": os.path.join(build, "bench", "event_flood"),
    }


def run_child(command, env=None, timeout=None):
    """Runs a command; returns (wall s, CPU s of the child and its children, peak RSS KiB of the largest
    child so far, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss, result.stdout


def key_values(text):
    """The "key: value" lines a bench program prints, as floats; a value may carry the unit " ns"."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            try:
                values[key.strip()] = float(value.removesuffix(" ns"))
            except ValueError:
                pass
    return values


def meta(trace):
    db = sqlite3.connect(trace)
    try:
        return dict(db.execute("SELECT key, value FROM meta"))
    finally:
        db.close()


def count_rows(trace, table):
    db = sqlite3.connect(trace)
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


def spread(values, fmt="{:.2f}"):
    """'median (min-max)'."""
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def print_table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")


def load_average():
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_measured(command, env=None):
    """Runs a command; returns (wall s, CPU s, peak RSS MiB) of that one child (os.wait4: its own rusage)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    stderr = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({child.returncode}): {stderr.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
