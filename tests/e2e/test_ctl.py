"""`gpumemtrace ctl` on a running process under the simulated runtime: snapshots that `report --at` / `--since` read,
a pause whose hidden frees leave no wrong leak, the errors, and a second user refused (recorder/control_channel.h)."""
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
import unittest

from gmt_e2e import CLI, TraceDirTestCase, find_leak, report_json, run_cli, sample, stop_run, wait_for

MiB = 1 << 20
ALLOC, FREE = 1, 2  # event_kinds.id of Alloc and Free (schema/trace_schema.h)


class ControlChannelTest(TraceDirTestCase):
    """slow_leak keeps one 1 MiB cache entry per iteration (~1 ms each) and frees them all at shutdown."""

    def start(self, iterations=2500):
        self.trace = self.path("t.db")
        self.app = subprocess.Popen([CLI, "run", "--simulate", "-o", self.trace, "--", sample("slow_leak"),
                                     str(iterations)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop)
        socket = self.trace + ".ctl"
        wait_for(lambda: os.path.exists(socket) and stat.S_ISSOCK(os.stat(socket).st_mode), what=f"{socket}")

    def stop(self):
        stop_run(self.app)

    def ctl(self, *args):
        return run_cli("ctl", *args)

    def ok(self, *args):
        result = self.ctl(*args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def cache_allocations_until(self, time_ns):
        """1 MiB allocations (the cache entries: every other allocation of slow_leak is larger) up to `time_ns`."""
        with sqlite3.connect(self.trace) as db:
            return db.execute("SELECT COUNT(*) FROM events WHERE kind = ? AND size = ? AND time_ns <= ?",
                              (ALLOC, MiB, time_ns)).fetchone()[0]

    def allocations_after(self, time_ns):
        with sqlite3.connect(self.trace) as db:
            return db.execute("SELECT COUNT(*) FROM events WHERE kind = ? AND time_ns >= ?",
                              (ALLOC, time_ns)).fetchone()[0]

    def live_at(self, time_ns):
        """Address -> size of the allocations live at `time_ns`, replaying the trace's events in order."""
        live = {}
        with sqlite3.connect(self.trace) as db:
            for kind, address, size in db.execute(
                    "SELECT e.kind, e.address, e.size FROM events e WHERE e.time_ns < ? ORDER BY e.time_ns, e.id",
                    (time_ns,)):
                if kind == ALLOC:
                    live[address] = size
                elif kind == FREE:
                    live.pop(address, None)
        return live

    def meta_int(self, key):
        with sqlite3.connect(self.trace) as db:
            return int(db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])

    def mark_time(self, name):
        with sqlite3.connect(self.trace) as db:
            rows = db.execute("SELECT m.time_ns FROM marks m JOIN strings n ON n.id = m.name_id JOIN strings d "
                              "ON d.id = m.domain_id WHERE d.text = 'gpumemtrace' AND n.text = ?", (name,)).fetchall()
        self.assertEqual(len(rows), 1, name)
        return rows[0][0]

    def test_snapshots_a_pause_and_what_the_report_says_of_them(self):
        self.start()
        time.sleep(0.3)
        self.assertIn("ok snapshot first", self.ok(self.trace, "snapshot", "first"))
        status = self.ok(self.trace, "status")
        self.assertIn("recording", status)
        pid = status.split("ok pid ")[1].split()[0]
        time.sleep(0.2)
        self.assertIn("ok paused", self.ok(pid, "pause"))  # by PID: the trace it holds open
        self.assertIn("paused", self.ok(pid, "status"))
        time.sleep(0.3)
        self.assertIn("ok resumed", self.ok(self.trace, "resume"))
        time.sleep(0.2)
        self.assertIn("ok snapshot second", self.ok(self.dir, "snapshot", "second"))  # a directory: every process
        self.app.wait(timeout=120)
        self.assertEqual(self.app.returncode, 0)
        self.assertFalse(os.path.exists(self.trace + ".ctl"), "the socket outlived the process")

        # At exit nothing is live (the cache is freed at shutdown, after the resume): no leak, nothing unjudged.
        report = report_json(self.trace)
        self.assertEqual(report["trace"]["control_pauses"], 1)
        self.assertEqual(report["trace"]["recording_pauses"], 1)
        self.assertEqual(report["trace"]["unjudged_after_pause"], {"allocations": 0, "bytes": 0})
        self.assertEqual(report["totals"]["leaked_bytes"], 0)

        # At the first snapshot: every cache entry made until then, to the byte.
        first = report_json(self.trace, "--at", "first")
        entries = self.cache_allocations_until(self.mark_time("snapshot:first"))
        self.assertGreater(entries, 0)
        cache = find_leak(first, "cache_result")
        self.assertEqual((cache["count"], cache["bytes"]), (entries, entries * MiB))
        self.assertEqual(first["trace"]["unjudged_after_pause"]["allocations"], 0)  # before the pause
        self.assertEqual(first["filters"]["until_snapshot"], "first")
        self.assertEqual(first["filters"]["until_ns"],
                         self.mark_time("snapshot:first") - self.meta_int("start_monotonic_ns"))

        # At the second: what was alive when the pause began is not judged (its free may have been missed), what
        # came after the resume is listed.
        second = report_json(self.trace, "--at", "second")
        pause = self.mark_time("pause")
        before_pause = self.cache_allocations_until(pause)
        after_resume = self.cache_allocations_until(self.mark_time("snapshot:second")) - before_pause
        alive_at_pause = self.live_at(pause)  # the cache, the model, and the step's temporaries of that moment
        self.assertGreaterEqual(len(alive_at_pause), before_pause + 1)
        self.assertEqual(second["trace"]["unjudged_after_pause"],
                         {"allocations": len(alive_at_pause), "bytes": sum(alive_at_pause.values())})
        cache = find_leak(second, "cache_result")
        self.assertEqual(cache["count"], after_resume)
        text = run_cli("report", "--at", "second", self.trace).stdout
        self.assertIn("alive when recording was paused (gpumemtrace ctl pause)", text)
        self.assertIn("live at the snapshot second", text)

        # --since NAME: only what was allocated after the snapshot (the shutdown frees them all).
        since = report_json(self.trace, "--since", "second")
        self.assertEqual(since["filters"]["since_snapshot"], "second")
        self.assertEqual(since["filters"]["allocations_matched"],
                         self.allocations_after(self.mark_time("snapshot:second")))

        missing = run_cli("report", "--at", "third", self.trace)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("it has: first, second", missing.stderr)

    def test_errors_name_what_is_wrong(self):
        result = self.ctl("999999999", "status")
        self.assertEqual(result.returncode, 8, result.stderr)
        self.assertIn("no process 999999999", result.stderr)
        result = self.ctl(str(os.getpid()), "status")  # a process not under `run`
        self.assertEqual(result.returncode, 8, result.stderr)
        self.assertIn("no gpumemtrace control channel", result.stderr)
        result = self.ctl(self.path("nothing.db"), "status")
        self.assertEqual(result.returncode, 2, result.stderr)
        self.start(iterations=400)
        result = self.ctl(self.trace, "snapshot")
        self.assertEqual(result.returncode, 2)
        self.assertIn("snapshot needs a NAME", result.stderr)
        result = self.ctl(self.trace, "snapshot", "two words")
        self.assertEqual(result.returncode, 2)
        self.assertIn("without spaces", result.stderr)
        self.app.wait(timeout=120)
        result = self.ctl(self.trace, "status")  # exited: its socket is gone
        self.assertEqual(result.returncode, 8, result.stderr)
        self.assertIn("no running process records into", result.stderr)

    def test_run_paused_records_nothing_until_resumed_through_the_launchers_pid(self):
        iterations = 2500
        self.trace = self.path("t.db")
        # Popen's pid is `gpumemtrace run` itself, the launcher whose PID a user sees: ctl acts on its app.
        self.app = subprocess.Popen([CLI, "run", "--simulate", "--paused", "-o", self.trace, "--", sample("slow_leak"),
                                     str(iterations)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.stop)
        launcher = str(self.app.pid)
        socket = self.trace + ".ctl"
        wait_for(lambda: os.path.exists(socket) and stat.S_ISSOCK(os.stat(socket).st_mode), what=f"{socket}")
        status = self.ok(launcher, "status")
        self.assertIn(f"{self.trace}: ok pid ", status)
        self.assertNotEqual(status.split("ok pid ")[1].split()[0], launcher)  # the app's pid, not run's
        self.assertIn("paused", status)
        time.sleep(0.5)
        self.assertIn("ok resumed", self.ok(launcher, "resume"))
        self.assertIn("recording", self.ok(launcher, "status"))
        _, err = self.app.communicate(timeout=120)
        self.assertEqual(self.app.returncode, 0, err)
        pause, resume = self.mark_time("pause"), self.mark_time("resume")
        with sqlite3.connect(self.trace) as db:
            before = db.execute("SELECT COUNT(*) FROM events WHERE time_ns < ?", (resume,)).fetchone()[0]
            frees = db.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (FREE,)).fetchone()[0]
        self.assertEqual(before, 0, "events were recorded while paused")
        self.assertLess(pause, resume)
        recorded_entries = self.cache_allocations_until(2**62)
        self.assertGreater(recorded_entries, 0)
        self.assertLess(recorded_entries, iterations)  # those made before the resume were not recorded
        report = report_json(self.trace)
        self.assertEqual(report["trace"]["recording_pauses"], 1)
        self.assertEqual(report["trace"]["control_pauses"], 1)
        # Nothing recorded was alive at the pause, and every recorded allocation was freed: no leak, nothing unjudged.
        self.assertEqual(report["trace"]["unjudged_after_pause"], {"allocations": 0, "bytes": 0})
        self.assertEqual(report["totals"]["leaked_bytes"], 0)
        totals = report["totals"]
        self.assertEqual(totals["frees"], totals["allocations"])
        # The frees of what was allocated while paused (the model, the entries kept before the resume, a step's
        # temporaries straddling it) matched nothing: counted apart, never a leak.
        self.assertEqual(totals["unmatched_frees"], frees - totals["frees"])
        self.assertGreaterEqual(totals["unmatched_frees"], iterations - recorded_entries + 1)
        self.assertLessEqual(totals["unmatched_frees"], iterations - recorded_entries + 3)
        text = run_cli("report", self.trace).stdout
        self.assertIn("warning: recording was paused 1 time for ", text)

    def test_ctl_on_a_process_that_started_no_recording_app(self):
        sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))
        result = self.ctl(str(sleeper.pid), "status")
        self.assertEqual(result.returncode, 8, result.stderr)
        self.assertIn("nor has any process it started", result.stderr)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to act as a second user")
    def test_another_user_is_refused(self):
        self.start(iterations=3000)
        # The CLI where the other user can run it, the trace's directory open to it: only the socket guards.
        bin_dir = tempfile.mkdtemp(prefix="gmt-ctl-bin-")
        self.addCleanup(shutil.rmtree, bin_dir)
        os.chmod(bin_dir, 0o755)
        cli = os.path.join(bin_dir, "gpumemtrace")
        shutil.copy(CLI, cli)
        os.chmod(self.dir, 0o755)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", cli, "ctl"]
        if subprocess.run([*as_nobody[:-1], "--version"], capture_output=True).returncode != 0:
            self.skipTest("the copied CLI does not run as another user here")
        # The socket file is 0600: the other user cannot connect.
        self.assertEqual(stat.S_IMODE(os.stat(self.trace + ".ctl").st_mode), 0o600)
        result = subprocess.run([*as_nobody, self.trace, "pause"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 9, result.stderr)
        self.assertIn("another user", result.stderr)
        # Even where the file's mode lets it connect, the process asks the peer's uid and refuses.
        os.chmod(self.trace + ".ctl", 0o666)
        result = subprocess.run([*as_nobody, self.trace, "pause"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 9, result.stderr)
        self.assertIn("refused", result.stderr)
        self.assertIn("recording", self.ok(self.trace, "status"))  # not paused by either attempt
        self.app.wait(timeout=120)


if __name__ == "__main__":
    unittest.main()
