"""What samples/nvtx_ranges does, and helpers to read NVTX ranges from a trace and from the recording injection
library (tests/nvtx/recording_injection.cpp). Paths come from the environment ctest sets (tests/nvtx/CMakeLists.txt).
"""
import collections
import os
import sqlite3
import subprocess

from gmt_e2e import CLI, sample

NVTX_TEST_DIR = os.environ.get("GMT_NVTX_TEST_DIR", "tests/nvtx")
RECORDING_LIBRARY = os.path.join(NVTX_TEST_DIR, "libnvtx_recording_injection.so")
COPIES_PROGRAM = os.path.join(NVTX_TEST_DIR, "nvtx_copies")
NVTX_SAMPLE = sample("nvtx_ranges")
WIDE = "wide \u00fcn\u00efc\u00f8d\u00e9 \u2713"
STEPS = 4

# samples/nvtx_ranges with its default 4 steps: (domain or None, name, depth, closed) -> count.
EXPECTED_RANGES = collections.Counter({
    (None, "epoch", 0, True): 1,
    (None, "step", 1, True): STEPS,
    ("sample.io", "load batch", 0, True): STEPS,
    (None, "ex range", 1, True): 1,
    (None, WIDE, 1, True): 1,
    (None, "worker", 0, True): 1,
    (None, "async copy", -1, True): 1,
    (None, "wide start", -1, True): 1,
    ("sample.io", "prefetch", -1, True): 1,
    (None, "never ended", -1, False): 1,
    (None, "left open", 0, False): 1,
})
EXPECTED_MARKS = collections.Counter({(None, "begin"): 1, ("sample.io", "batch loaded"): STEPS, (None, "wide mark"): 1})

# What --print-levels prints under a tool that tracks levels as NVTX specifies (0-based per domain and thread;
# a pop with nothing open is negative), in order.
EXPECTED_LEVELS = (
    [("push epoch", 0)]
    + [("push step", 1), ("push load_batch", 0), ("pop load_batch", 0), ("pop step", 1)] * STEPS
    + [("push ex", 1), ("pop ex", 1), ("push wide", 1), ("pop wide", 1), ("push worker", 0), ("pop worker", 0),
       ("pop epoch", 0), ("pop none", -1), ("push left_open", 0)]
)


SIM_ENV = {"LD_LIBRARY_PATH": os.path.join(os.environ.get("GMT_BUILD_DIR", "."), "lib/gpumemtrace/sim"),
           "GMT_SIM_QUIET": "1"}


def environment(extra=None):
    """This environment without any NVTX tool (a test may run under one), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("NVTX_INJECTION64_PATH", "GMT_NVTX_CHAIN")}
    env.update(extra or {})
    return env


def run_gmt(*args, env=None, timeout=300):
    return subprocess.run([CLI, *args], env=environment(env), capture_output=True, text=True, timeout=timeout)


def run_raw(*argv, env=None):
    """The program alone, on the simulated runtime."""
    return subprocess.run(list(argv), env=environment({**SIM_ENV, **(env or {})}), capture_output=True, text=True,
                          timeout=120)


def parse_levels(stdout):
    levels = []
    for line in stdout.splitlines():
        if line.startswith("level "):
            what, value = line[len("level "):].rsplit(" ", 1)
            levels.append((what, int(value)))
    return levels


class Range:
    def __init__(self, row):
        (self.id, self.thread_id, self.domain, self.name, self.start_ns, self.end_ns, self.depth,
         self.end_thread_id) = row

    @property
    def key(self):
        return (self.domain, self.name, self.depth, self.end_ns is not None)


def read_ranges(trace):
    with sqlite3.connect(trace) as db:
        rows = db.execute(
            "SELECT r.id, r.thread_id, d.text, n.text, r.start_ns, r.end_ns, r.depth, r.end_thread_id "
            "FROM ranges r LEFT JOIN strings d ON d.id = r.domain_id AND r.domain_id != 0 "
            "LEFT JOIN strings n ON n.id = r.name_id ORDER BY r.id").fetchall()
    return [Range(row) for row in rows]


def read_marks(trace):
    with sqlite3.connect(trace) as db:
        rows = db.execute(
            "SELECT d.text, n.text FROM marks m LEFT JOIN strings d ON d.id = m.domain_id AND m.domain_id != 0 "
            "LEFT JOIN strings n ON n.id = m.name_id ORDER BY m.id").fetchall()
    return collections.Counter(rows)


def read_strings(trace):
    with sqlite3.connect(trace) as db:
        return [text for (text,) in db.execute("SELECT text FROM strings")]


def read_recording(path):
    """The lines the recording injection library wrote, as tuples of fields."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]


def recorded_ranges(lines):
    """Pushes and starts the recording library received: (domain, message) -> count."""
    return collections.Counter((fields[1], fields[2]) for fields in lines if fields[0] in ("push", "start"))
