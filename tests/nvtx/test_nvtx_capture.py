"""The application's NVTX ranges and markers in the trace (schema v4: strings, ranges, marks), with no other NVTX
tool: samples/nvtx_ranges and tests/nvtx/nvtx_copies under the simulated runtime."""
import collections
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, parse_truth, report_json
from nvtx_support import (COPIES_PROGRAM, EXPECTED_LEVELS, EXPECTED_MARKS, EXPECTED_RANGES, NVTX_SAMPLE, parse_levels,
                          read_marks, read_ranges, run_gmt, run_raw)


class CaptureTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("nvtx.db")
        cls.raw = run_raw(NVTX_SAMPLE)
        cls.traced = run_gmt("run", "--simulate", "-o", cls.trace, "--", NVTX_SAMPLE)
        cls.ranges = read_ranges(cls.trace) if cls.traced.returncode == 0 else []

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_app_runs_unchanged(self):
        self.assertEqual(self.raw.returncode, 0, self.raw.stderr)
        self.assertEqual(self.traced.returncode, 0, self.traced.stderr)
        self.assertEqual(self.traced.stdout, self.raw.stdout)

    def test_trace_has_the_v4_tables(self):
        with sqlite3.connect(self.trace) as db:
            self.assertGreaterEqual(db.execute("PRAGMA user_version").fetchone()[0], 4)  # v4 added ranges, marks
            names = {name for (name,) in db.execute("SELECT name FROM event_kinds")}
            self.assertTrue({"range_begin", "range_end", "mark"} <= names)
            # Ranges and marks live in their own tables, never in events.
            self.assertEqual(db.execute("SELECT count(*) FROM events WHERE kind IN (17, 18, 19)").fetchone()[0], 0)

    def test_ranges_are_exactly_the_apps(self):
        self.assertEqual(collections.Counter(r.key for r in self.ranges), EXPECTED_RANGES)

    def test_closed_ranges_end_after_they_start_and_open_ones_have_no_end(self):
        for r in self.ranges:
            with self.subTest(name=r.name, id=r.id):
                if r.end_ns is None:
                    self.assertIsNone(r.end_thread_id)
                    self.assertIn(r.name, ("never ended", "left open"))
                else:
                    self.assertGreaterEqual(r.end_ns, r.start_ns)
                    self.assertIsNotNone(r.end_thread_id)

    def test_nesting_is_consistent_with_time(self):
        epoch = next(r for r in self.ranges if r.name == "epoch")
        steps = [r for r in self.ranges if r.name == "step"]
        batches = [r for r in self.ranges if r.name == "load batch"]
        for step in steps:
            self.assertTrue(epoch.start_ns <= step.start_ns <= step.end_ns <= epoch.end_ns)
        for step, batch in zip(steps, batches):
            self.assertTrue(step.start_ns <= batch.start_ns <= batch.end_ns <= step.end_ns)

    def test_threads(self):
        main = next(r for r in self.ranges if r.name == "epoch").thread_id
        worker = next(r for r in self.ranges if r.name == "worker")
        self.assertNotEqual(worker.thread_id, main)
        self.assertEqual(worker.end_thread_id, worker.thread_id)
        prefetch = next(r for r in self.ranges if r.name == "prefetch")  # ended on another thread
        self.assertEqual(prefetch.thread_id, main)
        self.assertNotEqual(prefetch.end_thread_id, main)

    def test_marks(self):
        self.assertEqual(read_marks(self.trace), EXPECTED_MARKS)

    def test_report_still_reads_the_trace(self):
        report = report_json(self.trace)
        truth = parse_truth(self.traced.stdout)[0]
        self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(report["totals"]["leaked_allocations"], 1)


class LevelsTest(unittest.TestCase):
    """Without any other tool the app's NVTX keeps working: push/pop return levels as NVTX specifies."""

    def setUp(self):
        self.dir = TraceDirTestCase()
        self.dir.setUp()

    def tearDown(self):
        self.dir.tearDown()

    def test_levels(self):
        traced = run_gmt("run", "-q", "--simulate", "-o", self.dir.path("levels.db"), "--", NVTX_SAMPLE,
                         "--print-levels")
        self.assertEqual(traced.returncode, 0, traced.stderr)
        self.assertEqual(parse_levels(traced.stdout), EXPECTED_LEVELS)

    def test_without_gpumemtrace_nvtx_reports_no_tracking(self):
        raw = run_raw(NVTX_SAMPLE, "--print-levels")
        self.assertEqual(raw.returncode, 0, raw.stderr)
        levels = parse_levels(raw.stdout)
        self.assertEqual([what for what, _ in levels], [what for what, _ in EXPECTED_LEVELS])
        self.assertTrue(all(value == -2 for _, value in levels))  # NVTX_NO_PUSH_POP_TRACKING


class CopiesTest(TraceDirTestCase):
    """Two NVTX copies (a program and a library), and a copy initialized twice: each range is captured once."""

    def test_every_copy_once(self):
        trace = self.path("copies.db")
        result = run_gmt("run", "-q", "--simulate", "-o", trace, "--", COPIES_PROGRAM)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines(), [
            "push outer 0", "library level 1", "pop outer 0", "second init 1", "push after 0", "pop after 0"])
        ranges = [(r.name, r.depth, r.end_ns is not None) for r in read_ranges(trace)]
        self.assertEqual(ranges, [("program outer", 0, True)] + [("library range", 1, True)] * 3 +
                         [("after second init", 0, True)])


class NoCaptureTest(TraceDirTestCase):
    def test_no_nvtx_capture_leaves_the_ranges_table_empty(self):
        trace = self.path("off.db")
        result = run_gmt("run", "--no-nvtx-capture", "--simulate", "-o", trace, "--", NVTX_SAMPLE)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, run_raw(NVTX_SAMPLE).stdout)
        self.assertEqual(read_ranges(trace), [])
        self.assertEqual(sum(read_marks(trace).values()), 0)


if __name__ == "__main__":
    unittest.main()
