"""posix_spawn, vfork (with and without exec), a daemon (double fork + setsid, the parent exits first) and
threads that start and end while others allocate, under `run --simulate`: no hang, and one complete trace
per process that touched CUDA, holding exactly what that process leaked. tests/reliability/process_models.cpp
is the program; the plain fork cases are in test_fork and e2e.test_processes."""
import glob
import os
import re
import time
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli
from reliability_util import RELIABILITY_BIN

PROGRAM = os.path.join(RELIABILITY_BIN, "process_models")
LINE = re.compile(r"(parent|child|daemon) pid=(\d+) leaked_bytes=(\d+) leaked_allocations=(\d+)")


def process_gone(pid):
    """True once `pid` has exited (gone, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


class ProcessModelsTest(TraceDirTestCase):
    def run_mode(self, *args):
        trace = self.path("app.db")
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", PROGRAM, *args, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stderr, "")
        return trace, result.stdout

    def check_traces(self, trace, lines, roles):
        """Each process's line -> its own trace: complete, 11 allocations, 10 frees, its leak exactly."""
        processes = [(role, int(pid), int(leaked)) for role, pid, leaked, _ in LINE.findall(lines)]
        self.assertEqual(sorted(role for role, _, _ in processes), sorted(roles), lines)
        root_pid = report_json(trace)["trace"]["pid"]
        expected_files = {trace if pid == root_pid else self.path(f"app.{pid}.db") for _, pid, _ in processes}
        self.assertEqual(set(glob.glob(self.path("app*.db"))), expected_files)
        for role, pid, leaked in processes:
            path = trace if pid == root_pid else self.path(f"app.{pid}.db")
            report = report_json(path)
            self.assertEqual(report["trace"]["pid"], pid, role)
            self.assertTrue(report["trace"]["complete"], role)
            self.assertEqual(report["totals"]["allocations"], 11, role)
            self.assertEqual(report["totals"]["frees"], 10, role)
            self.assertEqual(report["totals"]["leaked_bytes"], leaked, role)
            self.assertEqual(report["totals"]["leaked_allocations"], 1, role)
        return processes

    def test_posix_spawn(self):
        trace, out = self.run_mode("spawn")
        self.check_traces(trace, out, ["parent", "child"])

    def test_vfork(self):
        # The exec'ed child gets its own trace; the child that exits without exec leaves none and does not
        # disturb the parent, whose memory it shared.
        trace, out = self.run_mode("vfork")
        self.assertIn("exec child exit=0, exiting child exit=7", out)
        self.check_traces(trace, out, ["parent", "child"])

    def test_daemon(self):
        result_file = self.path("daemon.txt")
        trace, out = self.run_mode("daemon", result_file)
        # `run` returns when the original parent exits; the daemon goes on: wait for it to finish and exit.
        deadline = time.monotonic() + 60
        daemon_line = ""
        while time.monotonic() < deadline:
            if os.path.exists(result_file):
                with open(result_file) as f:
                    daemon_line = f.read()
                if daemon_line.endswith("done\n"):
                    break
            time.sleep(0.05)
        self.assertTrue(daemon_line.endswith("done\n"), f"the daemon did not finish: {daemon_line!r}")
        daemon_pid = int(LINE.search(daemon_line).group(2))
        while time.monotonic() < deadline and not process_gone(daemon_pid):
            time.sleep(0.05)
        self.assertTrue(process_gone(daemon_pid), "the daemon did not exit")
        # The middle process never touched CUDA after its fork: no trace of its own.
        self.check_traces(trace, out + daemon_line, ["parent", "daemon"])

    def test_threads_start_and_end_while_allocating(self):
        trace, out = self.run_mode("thread-churn")
        m = re.search(r"thread-churn threads=(\d+) leaked_bytes=(\d+) leaked_allocations=(\d+)", out)
        report = report_json(trace)
        totals = report["totals"]
        self.assertTrue(report["trace"]["complete"])
        self.assertEqual(totals["leaked_bytes"], int(m.group(2)))
        self.assertEqual(totals["leaked_allocations"], int(m.group(3)))
        # Every allocation but the leaked ones was freed, and none was lost or counted twice: 100 pairs per
        # short-lived thread, plus the steady thread's pairs (however many it managed).
        self.assertEqual(totals["allocations"] - totals["frees"], int(m.group(3)))
        self.assertGreaterEqual(totals["frees"], int(m.group(1)) * 100)
        self.assertEqual(report["trace"]["dropped_events"], 0)
        self.assertEqual(report["trace"]["event_count"], totals["allocations"] + totals["frees"])


if __name__ == "__main__":
    unittest.main()
