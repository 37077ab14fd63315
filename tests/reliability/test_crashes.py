"""An app that crashes or is killed leaves a readable trace: every event up to the last periodic flush (every
200 ms), and with the flush at fatal signals, every event up to the death. The CLI reports 128+signal, the
report says the trace is incomplete."""
import os
import signal
import time
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, parse_truth, report_json, run_cli, sample
from reliability_util import child_pid_of, parse_early, start_cli_run, wait_for_line

DEATHS = {"segv": signal.SIGSEGV, "abort": signal.SIGABRT, "sigterm-self": signal.SIGTERM}


class CrashTest(TraceDirTestCase):
    def crash(self, mode, wait_ms, env=None):
        trace = self.path(f"{mode}-{wait_ms}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("crashy"), mode, str(wait_ms), env=env)
        self.assertEqual(result.returncode, 128 + DEATHS[mode], result.stderr)
        self.assertIn(f"killed by signal {int(DEATHS[mode])}", result.stderr)
        self.assertIn("incomplete", result.stderr)  # the run summary says so
        truth = parse_truth(result.stdout)[0]
        early_bytes, early_count = parse_early(result.stdout)
        report = report_json(trace)  # exit 0, or it raises
        self.assertFalse(report["trace"]["complete"])
        return report, truth, early_bytes, early_count

    def check_early_present(self, report, early_bytes, early_count):
        early = find_leak(report, "early_allocations")
        self.assertEqual(early["bytes"], early_bytes)
        self.assertEqual(early["count"], early_count)

    def test_signal_flush_keeps_every_event(self):
        # Leaks made 400 ms before the death (after a periodic flush) and right before it: all of them.
        for mode in DEATHS:
            for wait_ms in (400, 0):
                with self.subTest(mode=mode, wait_ms=wait_ms):
                    report, truth, early_bytes, early_count = self.crash(mode, wait_ms)
                    self.check_early_present(report, early_bytes, early_count)
                    find_leak(report, "late_allocations")
                    self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
                    self.assertEqual(report["totals"]["leaked_allocations"], truth["leaked_allocations"])

    def test_periodic_flush_alone_keeps_what_is_older_than_200_ms(self):
        # No handlers at all (GMT_SIGNAL_FLUSH=0): what the writer committed before the death is there.
        for mode in DEATHS:
            with self.subTest(mode=mode):
                report, truth, early_bytes, early_count = self.crash(mode, 400, env={"GMT_SIGNAL_FLUSH": "0"})
                self.check_early_present(report, early_bytes, early_count)
                self.assertLessEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])

    def test_text_report_says_incomplete(self):
        trace = self.path("abort.db")
        run_cli("run", "--simulate", "-q", "-o", trace, "--", sample("crashy"), "abort", "0")
        result = run_cli("report", trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("incomplete", result.stdout)
        self.assertIn("incomplete", result.stderr)

    def test_killed_before_recording_started(self):
        # The app dies before any trace exists (here it never gets to CUDA at all): `run` says so, exits
        # 128+signal, and its stand-in trace is empty, incomplete and says why, instead of claiming "no CUDA
        # calls" in a complete trace.
        trace = self.path("killed-early.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", "sh", "-c", "kill -KILL $$")
        self.assertEqual(result.returncode, 128 + signal.SIGKILL, result.stderr)
        self.assertIn("the app died by signal 9 (Killed) before its trace was written", result.stderr)
        self.assertNotIn("no CUDA allocation calls", result.stderr)
        report = report_json(trace)
        self.assertFalse(report["trace"]["complete"])
        self.assertEqual(report["trace"]["stop_reason"], "killed by signal 9 (Killed) before its trace was written")
        self.assertEqual(report["trace"]["backend"], "runtime")
        self.assertEqual(report["trace"]["event_count"], 0)
        text = run_cli("report", trace)
        self.assertIn("incomplete: recording stopped early: killed by signal 9 (Killed) before its trace was written",
                      text.stdout)
        # An app that exits without touching CUDA: complete, no stop reason, as before.
        clean = self.path("no-cuda.db")
        result = run_cli("run", "-o", clean, "--", "sh", "-c", "exit 4")
        self.assertEqual(result.returncode, 4, result.stderr)
        self.assertIn("the app made no CUDA allocation calls", result.stderr)
        report = report_json(clean)
        self.assertTrue(report["trace"]["complete"])
        self.assertIsNone(report["trace"]["stop_reason"])
        self.assertIsNone(report["trace"]["backend"])  # --backend auto: nothing was decided

    def test_trace_left_without_its_schema(self):
        # The app ends while its writer is creating the trace (seen on the GPU: a SIGTERM handler calling
        # _exit at once): the file exists, empty or with the first pragmas only. `run` replaces it with the
        # stand-in, incomplete, saying so; `report` reads it (exit 0) instead of calling it damaged. The app
        # here makes those two file states itself, at the path the library would use ($GMT_OUTPUT).
        stumps = {
            "unfinished": ': > "$GMT_OUTPUT.init-$$"',  # the library's name for a trace being created
            "empty": ': > "$GMT_OUTPUT"',
            "pragmas": 'python3 -c "import os, sqlite3; db = sqlite3.connect(os.environ[\'GMT_OUTPUT\']); '
                       'db.execute(\'PRAGMA journal_mode=WAL\'); db.execute(\'PRAGMA user_version=4\'); db.close()"',
        }
        for name, make in stumps.items():
            with self.subTest(stump=name):
                trace = self.path(f"stump-{name}.db")
                result = run_cli("run", "--simulate", "-o", trace, "--", "sh", "-c", f"{make}; exit 42")
                self.assertEqual(result.returncode, 42, result.stderr)
                self.assertIn("the app ended (exit code 42) before its trace was written", result.stderr)
                report = report_json(trace)
                self.assertFalse(report["trace"]["complete"])
                self.assertEqual(report["trace"]["stop_reason"], "ended with exit code 42 before its trace was written")
                self.assertEqual(report["trace"]["event_count"], 0)
                self.assertEqual(oct(os.stat(trace).st_mode & 0o777), "0o600")
                self.assertEqual([f for f in os.listdir(self.dir) if ".init-" in f], [])

    def kill_busy_app(self, sig, target):
        trace = self.path(f"busy-{int(sig)}-{target}.db")
        cli = start_cli_run(trace, sample("crashy"), "busy-loop")
        app = child_pid_of(cli.pid)
        wait_for_line(cli, "running")
        time.sleep(0.3)
        os.kill(app if target == "app" else cli.pid, sig)
        cli.communicate(timeout=120)
        self.assertEqual(cli.returncode, 128 + sig)
        report = report_json(trace)
        self.assertFalse(report["trace"]["complete"])
        self.assertGreater(report["totals"]["allocations"], 0)
        find_leak(report, "busy_loop")
        return report

    def test_failed_allocation_survives_an_immediate_sigkill(self):
        # The app fails an allocation and SIGKILLs itself as the call returns: no handler runs and no periodic
        # flush comes in between, so the failure is there only because it was committed before the call returned
        # (in both trace modes), with the leaks made before it.
        for mode_args in ([], ["--aggregate"]):
            with self.subTest(mode=mode_args):
                trace = self.path(f"oom-kill{len(mode_args)}.db")
                result = run_cli("run", "--simulate", *mode_args, "-o", trace, "--", sample("crashy"), "oom-kill")
                self.assertEqual(result.returncode, 128 + signal.SIGKILL, result.stderr)
                requested = int(result.stdout.split("failed: request_bytes=")[1].split()[0])
                truth = parse_truth(result.stdout)[0]
                report = report_json(trace)
                self.assertFalse(report["trace"]["complete"])
                self.assertEqual(report["totals"]["failed_allocations"], 1)
                [failure] = report["failures"]
                self.assertEqual(failure["requested_bytes"], requested)
                self.assertEqual(failure["api"], "cudaMalloc")
                self.assertIn("oom_then_kill", str(failure["stack"]))
                self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])

    def test_sigkill_keeps_the_periodic_flushes(self):
        self.kill_busy_app(signal.SIGKILL, "app")

    def test_sigterm_from_outside(self):
        self.kill_busy_app(signal.SIGTERM, "app")

    def test_sigterm_to_the_cli_reaches_the_app(self):
        # The CLI passes TERM on; the app flushes and dies of it; the CLI exits 143 like the app.
        self.kill_busy_app(signal.SIGTERM, "cli")

    def test_trace_files_stay_owner_only(self):
        trace = self.path("mode.db")
        run_cli("run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--", sample("crashy"), "segv", "0")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(trace + suffix):
                self.assertEqual(os.stat(trace + suffix).st_mode & 0o777, 0o600, suffix)


if __name__ == "__main__":
    unittest.main()
