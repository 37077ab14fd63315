"""Runs the trace/report fuzzer briefly (the CI test) or at length (by hand).

Usage: run_fuzzer.py FUZZER CORPUS_DIR SECONDS [--seed-traces] [extra libFuzzer flags...]

Exits 77 (ctest: skipped) when FUZZER was not built (no clang with libFuzzer). With --seed-traces, an empty
CORPUS_DIR is first seeded with real traces made by the CLI from the samples (environment as for the e2e
tests: GMT_CLI, GMT_SAMPLES_DIR), shrunk to 512-byte pages so that mutations reach every table, plus a few
broken files.
New inputs that libFuzzer finds are kept in CORPUS_DIR; a crash is written to CORPUS_DIR/../artifacts/.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile


def shrink(source, target):
    """A copy of trace `source` as one small self-contained file (no WAL, 512-byte pages)."""
    shutil.copy(source, target)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(source + suffix):
            shutil.copy(source + suffix, target + suffix)
    db = sqlite3.connect(target)
    db.execute("PRAGMA journal_mode=DELETE")
    db.execute("PRAGMA page_size=512")
    db.execute("VACUUM")
    db.close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(target + suffix):
            os.unlink(target + suffix)


def make_seeds(corpus):
    cli = os.environ.get("GMT_CLI")
    samples = os.environ.get("GMT_SAMPLES_DIR")
    runs = {"leaky": ["leaky"], "threaded": ["threaded", "2", "20"], "crashed": ["crashy", "abort", "0"],
            "forking": ["forking", "fork"]}
    with tempfile.TemporaryDirectory(prefix="gmt-fuzz-seed-") as tmp:
        if cli and samples:
            for name, command in runs.items():
                trace = os.path.join(tmp, name + ".db")
                subprocess.run([cli, "run", "--simulate", "-q", "-o", trace, "--",
                                os.path.join(samples, command[0]), *command[1:]],
                               capture_output=True, timeout=120)
                if os.path.exists(trace):
                    shrink(trace, os.path.join(corpus, "seed-" + name))
        open(os.path.join(corpus, "seed-empty"), "wb").close()
        with open(os.path.join(corpus, "seed-header-only"), "wb") as f:
            f.write(b"SQLite format 3\0" + bytes(84))
        foreign = os.path.join(tmp, "foreign.db")
        db = sqlite3.connect(foreign)
        db.execute("PRAGMA page_size=512")
        db.execute("CREATE TABLE t(x)")
        db.commit()
        db.close()
        shutil.copy(foreign, os.path.join(corpus, "seed-foreign"))


def main():
    fuzzer, corpus, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    extra = sys.argv[4:]
    seed_traces = "--seed-traces" in extra
    extra = [arg for arg in extra if arg != "--seed-traces"]
    if not os.access(fuzzer, os.X_OK):
        print(f"SKIP: {fuzzer} was not built (no clang++ that links -fsanitize=fuzzer)")
        return 77
    os.makedirs(corpus, exist_ok=True)
    if seed_traces and not os.listdir(corpus):
        make_seeds(corpus)
    artifacts = os.path.join(os.path.dirname(os.path.abspath(corpus)), "artifacts")
    os.makedirs(artifacts, exist_ok=True)
    largest = max([os.path.getsize(os.path.join(corpus, f)) for f in os.listdir(corpus)] + [0])
    command = [fuzzer, f"-max_total_time={seconds}", "-timeout=10", "-rss_limit_mb=2048",
               f"-max_len={max(largest + largest // 4, 4096)}", f"-artifact_prefix={artifacts}/", "-print_final_stats=1",
               *extra, corpus]
    print(" ".join(command), flush=True)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        env["TMPDIR"] = "/dev/shm"  # the scratch trace of each input: no disk I/O
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    log = result.stderr
    done = re.findall(r"Done (\d+) runs in (\d+) second", log)
    print("\n".join(line for line in log.splitlines()
                    if line.startswith(("stat::", "Done", "INFO: Seed", "==", "SUMMARY")) or "ERROR" in line))
    if result.returncode != 0:
        print(log[-20000:])
        print(f"FAIL: the fuzzer found a crash (exit {result.returncode}); input saved under {artifacts}/")
        return 1
    print(f"OK: {done[-1][0] if done else '?'} runs in {seconds} s, no crash; corpus {len(os.listdir(corpus))} inputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
