"""The benchmark control gmt_set_recording_paused (recorder/pause.cpp): while recording is paused the hooks record
nothing, recording resumes exactly, and the trace and the report say that events are missing."""
import os
import sqlite3
import sys
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pause_app.py")


class RecordingPauseTest(TraceDirTestCase):
    def run_app(self, name, *args):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "--no-python-hooks", "-o", trace, "--", sys.executable, APP, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            sizes = [row[0] for row in db.execute("SELECT size FROM events WHERE kind = 1 ORDER BY id")]
        return trace, result.stdout, meta, sizes

    def test_paused_allocations_and_frees_are_not_recorded(self):
        trace, stdout, meta, sizes = self.run_app("paused.db")
        # The first pause returns 0 (was running), the second 1 (already paused), the resume 1.
        self.assertEqual(stdout.split(), ["was", "paused:", "0", "was", "paused:", "1", "was", "paused:", "1"])
        self.assertEqual(sizes, [1000, 500, 3000, 2000])  # not the 7000 B made during the pause
        self.assertEqual(meta["recording_pauses"], "1")
        self.assertGreaterEqual(int(meta["recording_paused_ns"]), 50_000_000)  # the app slept 50 ms paused
        report = report_json(trace)
        # The 500 B block was freed during the pause: its free is missing, so it counts as live (its address is not
        # reused later, which would end it).
        self.assertEqual(report["totals"]["leaked_bytes"], 1000 + 500 + 3000)
        self.assertEqual(report["totals"]["allocations"], 4)
        self.assertEqual(report["totals"]["frees"], 1)
        self.assertEqual(report["trace"]["recording_pauses"], 1)
        self.assertEqual(report["trace"]["recording_paused_ns"], int(meta["recording_paused_ns"]))
        text = run_cli("report", trace)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("warning: recording was paused 1 time for", text.stdout)

    def test_without_a_pause_everything_is_recorded_and_nothing_is_said(self):
        trace, _, meta, sizes = self.run_app("running.db", "--no-pause")
        self.assertEqual(sizes, [1000, 500, 7000, 3000, 2000])
        self.assertNotIn("recording_pauses", meta)
        report = report_json(trace)
        self.assertEqual(report["totals"]["leaked_bytes"], 1000 + 7000 + 3000)
        self.assertEqual(report["trace"]["recording_pauses"], 0)
        self.assertNotIn("recording was paused", run_cli("report", trace).stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
