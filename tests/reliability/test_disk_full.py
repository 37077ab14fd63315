"""The disk fills up while the trace is written: the app runs to its normal end with its normal output and
exit code, gpumemtrace says so once, and what was written before stays readable.

A real full filesystem: a small tmpfs mounted in a private mount namespace (`unshare --mount`, with
`--map-root-user` when not root), so nothing outside the test sees it and it vanishes with the test. The
trace is copied out of it before the namespace ends. Where mount namespaces are not allowed (some
containers), the test skips and says why."""
import os
import shlex
import subprocess
import unittest

from gmt_e2e import CLI, TraceDirTestCase, report_json, sample
from reliability_util import preload_env, sim_env

# ~20k events/s for 1.5 s: the first batches fit in 512 KiB, the later ones do not.
STEADY = [sample("crashy"), "steady", "1500"]


def unshare_command():
    return ["unshare", "--mount"] + ([] if os.geteuid() == 0 else ["--map-root-user"])


def namespaces_work():
    try:
        probe = subprocess.run([*unshare_command(), "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, str(e)
    return probe.returncode == 0, probe.stderr.strip()


class DiskFullTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.works, cls.why = namespaces_work()

    def setUp(self):
        super().setUp()
        if not self.works:
            self.skipTest(f"no private tmpfs here (unshare --mount: {self.why})")
        self.mnt = self.path("full")
        self.out = self.path("out")
        os.makedirs(self.mnt)
        os.makedirs(self.out)

    def small_disk_command(self, size, command, mnt=None, out=None):
        """`command` run with a `size` tmpfs on `mnt` (self.mnt), then what is there copied to `out` (self.out)."""
        mnt, out = shlex.quote(mnt or self.mnt), shlex.quote(out or self.out)
        script = (f"mount -t tmpfs -o size={size},mode=0700 tmpfs {mnt} || exit 99; "
                  f"{shlex.join(command)}; rc=$?; cp -a {mnt}/. {out}/; exit $rc")
        return [*unshare_command(), "sh", "-c", script]

    def run_on_small_disk(self, size, command, env):
        return subprocess.run(self.small_disk_command(size, command), env=env, capture_output=True, text=True,
                              timeout=240)

    def the_one_warning(self, result, reference):
        """The app's exit code and output unchanged, and the one line gpumemtrace said on stderr."""
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, reference.stdout)
        warnings = [line for line in result.stderr.splitlines() if line.startswith("gpumemtrace:")]
        self.assertEqual(len(warnings), 1, result.stderr)
        return warnings[0]

    def reference(self):
        result = subprocess.run(STEADY, env=sim_env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result

    def test_disk_fills_up_while_writing(self):
        # The library preloaded by hand: everything on stderr is gpumemtrace's.
        reference = self.reference()
        trace = os.path.join(self.mnt, "t.db")
        result = self.run_on_small_disk("512k", STEADY, preload_env(trace))
        self.assertNotEqual(result.returncode, 99, "mount failed: " + result.stderr)
        warning = self.the_one_warning(result, reference)
        self.assertIn("writing the trace", warning)
        self.assertIn("full", warning)
        self.assertIn("profiling stopped", warning)
        report = report_json(os.path.join(self.out, "t.db"))  # what was written is readable
        self.assertFalse(report["trace"]["complete"])
        self.assertGreater(report["totals"]["allocations"], 0)
        self.assertLess(report["trace"]["event_count"], 20000)
        # The trace says why it stopped, and `report` says it rather than guessing a crash.
        self.assertEqual(report["trace"]["stop_reason"], "disk full: database or disk is full")
        text = subprocess.run([CLI, "report", os.path.join(self.out, "t.db")], capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("the trace is incomplete: recording stopped early: disk full", text.stdout)
        self.assertIn("incomplete (recording stopped early: disk full", text.stderr)
        self.assertNotIn("crashed", text.stdout + text.stderr)

    def test_the_stop_reason_fits_wherever_the_disk_fills(self):
        # The disk fills at a different point of a transaction for each size. Some left no room for even the
        # stop reason's one WAL frame (404 KiB, every time, before the writer held space back for it).
        sizes = [f"{kib}k" for kib in range(392, 448, 8)]
        runs = {}
        for size in sizes:
            mnt, out = self.path("mnt-" + size), self.path("out-" + size)
            os.makedirs(mnt)
            os.makedirs(out)
            command = self.small_disk_command(size, STEADY, mnt, out)
            runs[size] = (out, subprocess.Popen(command, env=preload_env(os.path.join(mnt, "t.db")),
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for size, (out, process) in runs.items():
            _, stderr = process.communicate(timeout=240)
            self.assertEqual(process.returncode, 0, f"{size}: {stderr}")
            self.assertIn("database or disk is full", stderr, size)
            report = report_json(os.path.join(out, "t.db"))
            self.assertEqual(report["trace"]["stop_reason"], "disk full: database or disk is full", size)
            # The reserve given back also leaves room for the close's checkpoint: the trace is one file again.
            self.assertEqual(sorted(os.listdir(out)), ["t.db"], size)

    def test_disk_fills_up_under_the_cli(self):
        reference = self.reference()
        trace = os.path.join(self.mnt, "t.db")
        result = self.run_on_small_disk("512k", [CLI, "run", "--simulate", "-o", trace, "--", *STEADY],
                                        dict(os.environ))
        self.assertEqual(result.returncode, 0, result.stderr)  # the app's exit code, passed through
        self.assertEqual(result.stdout, reference.stdout)
        self.assertEqual(result.stderr.count("gpumemtrace: writing the trace"), 1, result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        report = report_json(os.path.join(self.out, "t.db"))
        self.assertFalse(report["trace"]["complete"])
        self.assertGreater(report["totals"]["allocations"], 0)
        self.assertTrue(report["trace"]["stop_reason"].startswith("disk full: "), report["trace"])
        # The run summary, printed inside the namespace while the disk was still full, says it too.
        self.assertIn("incomplete (recording stopped early: disk full", result.stderr)

    def test_disk_full_from_the_start(self):
        # Not even the empty trace fits: the app runs unprofiled, one warning, and no file is left behind. At
        # 8 KiB its first page does not fit; at 176 KiB its WAL fits but the checkpoint into the file does not,
        # which once left a half-written trace (read as "malformed") and the temporary's WAL beside it.
        reference = self.reference()
        for size in ["8k", "176k"]:
            for name in os.listdir(self.out):
                os.unlink(os.path.join(self.out, name))
            result = self.run_on_small_disk(size, STEADY, preload_env(os.path.join(self.mnt, "t.db")))
            warning = self.the_one_warning(result, reference)
            self.assertIn("cannot create trace", warning)
            self.assertIn("continues without profiling", warning)
            self.assertEqual(os.listdir(self.out), [], size)


if __name__ == "__main__":
    unittest.main()
