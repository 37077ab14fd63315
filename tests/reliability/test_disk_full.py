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

    def run_on_small_disk(self, size, command, env):
        """Runs `command` with a `size` tmpfs on self.mnt, then copies what is there to self.out."""
        script = (f"mount -t tmpfs -o size={size},mode=0700 tmpfs {shlex.quote(self.mnt)} || exit 99; "
                  f"{shlex.join(command)}; rc=$?; cp -a {shlex.quote(self.mnt)}/. {shlex.quote(self.out)}/; exit $rc")
        return subprocess.run([*unshare_command(), "sh", "-c", script], env=env, capture_output=True, text=True,
                              timeout=240)

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
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, reference.stdout)
        warnings = [line for line in result.stderr.splitlines() if line.startswith("gpumemtrace:")]
        self.assertEqual(len(warnings), 1, result.stderr)
        self.assertIn("writing the trace", warnings[0])
        self.assertIn("full", warnings[0])
        self.assertIn("profiling stopped", warnings[0])
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
        # Not even the empty trace fits: the app runs unprofiled, one warning.
        reference = self.reference()
        result = self.run_on_small_disk("8k", STEADY, preload_env(os.path.join(self.mnt, "t.db")))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, reference.stdout)
        warnings = [line for line in result.stderr.splitlines() if line.startswith("gpumemtrace:")]
        self.assertEqual(len(warnings), 1, result.stderr)
        self.assertIn("continues without profiling", warnings[0])


if __name__ == "__main__":
    unittest.main()
