"""Damaged traces give back what they can (docs/reliability.md, "Damaged traces").

Traces are written by samples under `gpumemtrace run --simulate`, then damaged: 1000 random truncations and
overwrites analyzed in process (damaged_traces.cpp), a trace cut in half whose surviving allocations this test
computes from SQLite's own page map (the dbstat table), and traces without one table each.
"""
import json
import os
import subprocess
import shutil
import sqlite3
import tempfile
import unittest

from gmt_e2e import CLI, run_cli, sample
from reliability_util import RELIABILITY_BIN

# Each optional table and the words its absence gets (analysis/read/trace_tables.cpp is the one place that says them).
OPTIONAL_TABLES = {
    "stacks": "no allocation has a call stack",
    "stack_frames": "no allocation has a call stack",
    "modules": "frames name no module",
    "symbols": "frames show addresses only, without functions, files or lines",
    "alloc_failures": "failed allocations show no free device memory (out of memory or fragmentation is unknown)",
    "pool_usage": "no stream-ordered pool figures",
    "strings": "NVTX ranges and Python frames have no names",
    "ranges": "no memory by NVTX range",
    "python_frames": "call stacks show no Python frames",
    "allocator_stats": "no framework allocator statistics",
    "devices": "devices are named by number only",
}


def thousands(value):
    return f"{value:,}"


def record(trace, *command):
    result = run_cli("run", "--simulate", "-q", "-o", trace, "--", *command)
    if result.returncode != 0:
        raise AssertionError(f"run failed ({result.returncode}): {result.stderr}")


def surviving_event_ids(trace, cut):
    """The ids of the events whose leaf page lies wholly in the first `cut` bytes. dbstat names each page of the
    event_rows b-tree; its path orders the leaves as their keys are ordered, so leaf k holds the next ncell ids."""
    with sqlite3.connect(f"file:{trace}?mode=ro", uri=True) as db:
        page_size = db.execute("PRAGMA page_size").fetchone()[0]
        leaves = db.execute("SELECT pageno, ncell, path FROM dbstat WHERE name = 'event_rows' AND pagetype = 'leaf'")
        leaves = sorted(leaves.fetchall(), key=lambda row: row[2])
        ids = [row[0] for row in db.execute("SELECT id FROM events ORDER BY id")]
    assert sum(row[1] for row in leaves) == len(ids), "dbstat's leaves do not hold every event"
    surviving, at = [], 0
    for pageno, cells, _ in leaves:
        if pageno * page_size <= cut:
            surviving += ids[at:at + cells]
        at += cells
    return surviving


def replay(trace, ids):
    """Allocations, frees and what is live at the end, from these events alone (the sample allocates device
    memory with cudaMalloc and frees it with cudaFree: kinds 1 and 2)."""
    wanted = set(ids)
    live, allocations, frees = {}, 0, 0
    with sqlite3.connect(f"file:{trace}?mode=ro", uri=True) as db:
        for event_id, kind, address, size in db.execute(
                "SELECT id, kind, address, size FROM events ORDER BY time_ns, id"):
            if event_id not in wanted:
                continue
            if kind == 1:
                allocations += 1
                if address != 0:
                    live[address] = size
            elif kind == 2 and address in live:
                frees += 1
                del live[address]
    return dict(allocations=allocations, frees=frees, leaked_allocations=len(live),
                leaked_bytes=sum(live.values()))


def listing(directory):
    return sorted((name, os.stat(os.path.join(directory, name)).st_size,
                   os.stat(os.path.join(directory, name)).st_mtime_ns) for name in os.listdir(directory))


class DamagedTraces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._dir = tempfile.TemporaryDirectory(prefix="gmt-damaged-")
        cls.dir = cls._dir.name
        # 8 threads, 400 pairs each, each thread leaking one allocation: ~6,400 events over many pages.
        cls.threaded = os.path.join(cls.dir, "threaded.db")
        record(cls.threaded, sample("threaded"), "8", "400")
        # NVTX ranges and their names: a trace with every optional table the report reads.
        cls.ranges = os.path.join(cls.dir, "ranges.db")
        record(cls.ranges, sample("nvtx_ranges"), "--steps", "20")

    @classmethod
    def tearDownClass(cls):
        cls._dir.cleanup()

    def copy(self, trace, name):
        folder = tempfile.mkdtemp(prefix="copy-", dir=self.dir)
        path = os.path.join(folder, name)
        shutil.copyfile(trace, path)
        return path

    def test_random_truncations_and_overwrites(self):
        work = tempfile.mkdtemp(prefix="random-", dir=self.dir)
        tmp = tempfile.mkdtemp(prefix="tmp-", dir=self.dir)
        result = subprocess.run([os.path.join(RELIABILITY_BIN, "damaged_traces"), self.threaded, "1000", "26", work],
                                capture_output=True, text=True, timeout=600, env=dict(os.environ, TMPDIR=tmp))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("1000 damaged copies", result.stdout)
        self.assertEqual(os.listdir(tmp), [], "the salvage left temporary files behind")

    def test_truncated_at_half_gives_the_surviving_allocations(self):
        trace = self.copy(self.threaded, "half.db")
        cut = os.path.getsize(trace) // 2
        with open(trace, "r+b") as f:
            f.truncate(cut)
        before = listing(os.path.dirname(trace))
        ids = surviving_event_ids(self.threaded, cut)
        self.assertGreater(len(ids), 0)
        expected = replay(self.threaded, ids)

        result = run_cli("report", "--format", "json", trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertFalse(report["trace"]["complete"])
        salvaged = report["trace"]["salvaged"]
        self.assertIsNotNone(salvaged)
        size = os.path.getsize(self.threaded)
        self.assertTrue(salvaged.startswith("salvaged: the trace was damaged (truncated at "), salvaged)
        read = (f"{thousands(len(ids))} of at least {thousands(max(ids))} events were read" if max(ids) > len(ids)
                else f"{thousands(len(ids))} events were read")
        self.assertIn(read, salvaged)
        self.assertTrue(salvaged.endswith("the report is incomplete"), salvaged)
        self.assertIn(salvaged, result.stderr)
        self.assertEqual(report["trace"]["event_count"], len(ids))
        for key, value in expected.items():
            self.assertEqual(report["totals"][key], value, key)
        self.assertGreater(size, cut)
        self.assertEqual(listing(os.path.dirname(trace)), before, "report wrote beside the trace")

        text = run_cli("report", trace)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("warning: the trace is incomplete: salvaged: the trace was damaged", text.stdout)

    def test_each_missing_optional_table_degrades_its_part_only(self):
        whole = run_cli("report", "--format", "json", self.ranges)
        self.assertEqual(whole.returncode, 0, whole.stderr)
        totals = json.loads(whole.stdout)["totals"]
        for table, missing in OPTIONAL_TABLES.items():
            with self.subTest(table=table):
                trace = self.copy(self.ranges, f"no_{table}.db")
                with sqlite3.connect(trace) as db:
                    db.execute(f"DROP TABLE {table}")
                db.close()
                result = run_cli("report", trace)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn(f"warning: the trace has no {table} table: {missing}", result.stdout)
                if table == "ranges":
                    self.assertIn("  the trace has no ranges table: no memory by NVTX range\n", result.stdout)
                if table == "symbols":
                    # Leaks still listed, from raw addresses: module+offset, as addr2line takes them.
                    self.assertRegex(result.stdout, r"\n    at nvtx_ranges\+0x[0-9a-f]+\n")
                report = json.loads(run_cli("report", "--format", "json", trace).stdout)
                self.assertEqual(report["totals"], totals)
                self.assertIn(f"the trace has no {table} table: {missing}", report["trace"]["missing_tables"])

    def test_missing_required_table_is_refused_with_exit_2(self):
        # From schema v12 on, events is a view of the tables event_rows and event_types.
        for table in ("meta", "event_rows", "event_types", "events"):
            with self.subTest(table=table):
                trace = self.copy(self.ranges, f"no_{table}.db")
                with sqlite3.connect(trace) as db:
                    db.execute(f"DROP {'VIEW' if table == 'events' else 'TABLE'} {table}")
                db.close()
                result = run_cli("report", trace)
                self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                self.assertIn(f"'{trace}' has no {table} table, which every trace needs", result.stderr)


if __name__ == "__main__":
    unittest.main()
