"""`report` on a trace that is still being written (a service that runs for days): it reads what the writer
has committed so far, says the trace is incomplete, and the app goes on allocating while and after it reads."""
import os
import signal
import time
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, report_json, run_cli, sample
from reliability_util import child_pid_of, start_cli_run, wait_for_line


class LiveReportTest(TraceDirTestCase):
    def test_report_while_the_app_runs(self):
        trace = self.path("live.db")
        cli = start_cli_run(trace, sample("crashy"), "busy-loop")  # allocates and frees until killed
        try:
            app = child_pid_of(cli.pid)
            wait_for_line(cli, "running")
            time.sleep(0.5)  # at least two periodic flushes
            first = report_json(trace)
            time.sleep(0.5)
            second = report_json(trace)
            text = run_cli("report", trace)
            self.assertEqual(text.returncode, 0, text.stderr)
            self.assertIn("incomplete", text.stderr)
            # The app was not stopped by the reads: it is alive and the trace kept growing.
            os.kill(app, 0)
            for report in (first, second):
                self.assertFalse(report["trace"]["complete"])
                self.assertGreater(report["totals"]["allocations"], 0)
                # Its first allocation is never freed. Frames are symbolized after the run, so not named yet.
                self.assertGreaterEqual(report["totals"]["leaked_allocations"], 1)
            self.assertGreater(second["totals"]["allocations"], first["totals"]["allocations"])
            self.assertGreater(second["trace"]["event_count"], first["trace"]["event_count"])
        finally:
            if cli.poll() is None:
                os.kill(child_pid_of(cli.pid), signal.SIGTERM)
            cli.communicate(timeout=120)
        self.assertEqual(cli.returncode, 128 + signal.SIGTERM)
        final = report_json(trace)  # the trace stays readable after the app is gone, now symbolized
        self.assertGreaterEqual(final["totals"]["allocations"], second["totals"]["allocations"])
        find_leak(final, "busy_loop")


if __name__ == "__main__":
    unittest.main()
