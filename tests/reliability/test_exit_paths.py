"""Every way a process ends keeps what it recorded or says what is missing (issue: an app that allocated and then
called _exit got a trace marked complete with nothing in it, and "no leaks"). Under `run --simulate`,
tests/reliability/exit_paths.cpp makes 15 allocations of 1 MiB + i bytes right before it ends. _exit, _Exit and
exec keep all 15 in a complete trace; abort keeps them in an incomplete one; after SIGKILL the trace is
incomplete, says how many recorded events never reached it (the counters `run` shares with the process), and no
verdict of "no leaks" or a passed gate is given on it without --allow-incomplete."""
import os
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli
from reliability_util import RELIABILITY_BIN

PROGRAM = os.path.join(RELIABILITY_BIN, "exit_paths")
COUNT = 15
LEAKED = sum((1 << 20) + i for i in range(COUNT))


class ExitPathsTest(TraceDirTestCase):
    def run_mode(self, mode, expected_code):
        trace = self.path(f"{mode}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", PROGRAM, mode, str(COUNT), timeout=120)
        self.assertEqual(result.returncode, expected_code, result.stdout + result.stderr)
        return trace, result

    def check_all_kept(self, trace, complete):
        report = report_json(trace, "--allow-incomplete")
        self.assertEqual(report["trace"]["complete"], complete)
        self.assertEqual(report["totals"]["allocations"], COUNT)
        self.assertEqual(report["totals"]["leaked_allocations"], COUNT)
        self.assertEqual(report["totals"]["leaked_bytes"], LEAKED)
        return report

    def test_exit_right_after_allocating(self):
        for mode, code in (("_exit", 5), ("_Exit", 6)):
            with self.subTest(mode=mode):
                trace, result = self.run_mode(mode, code)
                report = self.check_all_kept(trace, complete=True)
                self.assertEqual(report["trace"]["app_exit_status"], code)
                self.assertIn(f"({LEAKED} B) in {COUNT} CUDA-level allocations", result.stderr)  # run's summary
                self.assertNotIn("no CUDA allocation", result.stderr)
                gate = run_cli("report", "--fail-on-leak", "-o", os.devnull, trace)
                self.assertEqual(gate.returncode, 1, gate.stderr)

    def test_exec_without_fork(self):
        trace, result = self.run_mode("execv", 0)
        self.assertIn("after exec", result.stdout)
        self.check_all_kept(trace, complete=True)

    def test_failed_exec_goes_on_recording(self):
        trace, result = self.run_mode("exec-fails", 7)
        self.assertIn("exec failed", result.stdout)
        report = report_json(trace)
        self.assertTrue(report["trace"]["complete"])
        self.assertEqual(report["totals"]["allocations"], COUNT + 2)
        self.assertEqual(report["totals"]["leaked_allocations"], COUNT + 2)

    def test_abort_keeps_everything_and_refuses_a_verdict(self):
        trace, result = self.run_mode("abort", 128 + 6)
        report = self.check_all_kept(trace, complete=False)
        self.assertEqual(report["trace"]["app_exit_signal"], 6)
        self.assertFalse(report["trace"]["supports_verdict"])
        gate = run_cli("report", "--fail-on-leak=1GiB", "-o", os.devnull, trace)
        self.assertEqual(gate.returncode, 4, gate.stderr)
        self.assertIn("no verdict", gate.stderr)
        allowed = run_cli("report", "--fail-on-leak=1GiB", "--allow-incomplete", "-o", os.devnull, trace)
        self.assertEqual(allowed.returncode, 0, allowed.stderr)

    def test_sigkill_is_incomplete_and_never_clean(self):
        for mode in ("sigkill", "sigkill-freed"):
            with self.subTest(mode=mode):
                trace, result = self.run_mode(mode, 128 + 9)
                self.assertNotIn("no leaks: every allocation was freed", result.stderr)
                self.assertNotIn("made no CUDA allocation calls", result.stderr)
                self.assertNotIn("recorded no allocations", result.stderr)
                self.assertRegex(result.stderr, "no verdict|leaked")
                report = report_json(trace, "--allow-incomplete")
                self.assertFalse(report["trace"]["complete"])
                self.assertEqual(report["trace"]["app_exit_signal"], 9)
                # Whatever reached the trace before the kill is exact; the rest is counted as lost: every event the
                # app made (an allocation, and a free in sigkill-freed) is in the trace or in the count.
                self.assertLessEqual(report["totals"]["allocations"], COUNT)
                produced = COUNT * (2 if mode == "sigkill-freed" else 1)
                lost = report["trace"]["events_lost_at_exit"]
                self.assertEqual(report["trace"]["event_count"] + lost, produced)
                text = run_cli("report", trace)
                self.assertEqual(text.returncode, 0, text.stderr)
                self.assertNotIn("every allocation was freed", text.stdout)
                self.assertIn("the trace is incomplete", text.stdout)
                gate = run_cli("report", "--fail-on-leak=1GiB", "-o", os.devnull, trace)
                self.assertEqual(gate.returncode, 4, gate.stderr)
                allowed = run_cli("report", "--fail-on-leak=1GiB", "--allow-incomplete", "-o", os.devnull, trace)
                self.assertEqual(allowed.returncode, 0, allowed.stderr)

    def test_sigkill_counts_the_events_still_pending(self):
        # COUNT allocations committed, half a second, COUNT more still in the buffers at the kill (exit_paths.cpp).
        trace, result = self.run_mode("sigkill-pending", 128 + 9)
        report = report_json(trace, "--allow-incomplete")
        self.assertEqual(report["trace"]["event_count"], COUNT)
        self.assertEqual(report["totals"]["allocations"], COUNT)
        self.assertEqual(report["trace"]["events_lost_at_exit"], COUNT)
        sentence = f"{COUNT} events recorded in the process's last moments were lost (killed by signal 9)"
        self.assertIn(sentence, result.stderr)
        self.assertIn(sentence, run_cli("report", trace).stdout)

    def test_clean_exits_lose_nothing(self):
        for mode, code in (("_exit", 5), ("execv", 0)):
            with self.subTest(mode=mode):
                trace, _ = self.run_mode(mode, code)
                report = report_json(trace)
                self.assertEqual(report["trace"]["events_lost_at_exit"], 0)
                self.assertEqual(report["trace"]["event_count"], COUNT)

    def test_nothing_recorded_is_not_a_clean_run(self):
        trace = self.path("true.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("recorded no allocations", result.stderr)
        self.assertNotIn("every allocation was freed", result.stderr)
        text = run_cli("report", trace)
        self.assertIn("Recorded no allocations.", text.stdout)
        self.assertNotIn("every allocation was freed", text.stdout)


if __name__ == "__main__":
    unittest.main()
