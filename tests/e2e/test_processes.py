"""Every process gets its own trace: forked children, exec'ed children, and apps that never touch CUDA."""
import glob
import os
import signal
import subprocess
import unittest

from gmt_e2e import CLI, TraceDirTestCase, find_leak, report_json, run_cli, sample, wait_for


class ProcessesTest(TraceDirTestCase):
    def check_parent_and_child(self, mode):
        trace = self.path(f"{mode}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("forking"), mode)
        self.assertEqual(result.returncode, 0, result.stderr)
        children = [p for p in glob.glob(self.path(f"{mode}.*.db"))]
        self.assertEqual(len(children), 1, os.listdir(self.dir))
        parent = report_json(trace)
        child = report_json(children[0])
        self.assertEqual(parent["totals"]["leaked_bytes"], 1 << 20)
        find_leak(parent, "parent_work")
        self.assertEqual(child["totals"]["leaked_bytes"], 2 << 20)
        find_leak(child, "child_work")
        self.assertNotEqual(parent["trace"]["pid"], child["trace"]["pid"])
        self.assertTrue(child["trace"]["complete"])
        # the CLI symbolized and summarized both
        self.assertIn(children[0], result.stderr)

    def test_forked_child_writes_its_own_trace(self):
        self.check_parent_and_child("fork")

    def test_execed_child_writes_its_own_trace(self):
        self.check_parent_and_child("exec")

    def test_pid_pattern(self):
        result = run_cli("run", "--simulate", "-o", self.path("t.%p.db"), "--", sample("forking"), "fork")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(glob.glob(self.path("t.*.db"))), 2)

    def test_app_without_cuda_gets_an_empty_valid_trace(self):
        trace = self.path("true.db")
        result = run_cli("run", "-o", trace, "--", "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        self.assertEqual(report["totals"]["allocations"], 0)
        self.assertEqual(report["leaks"], [])
        self.assertTrue(report["trace"]["complete"])

    def test_a_killed_runs_temporary_files_are_removed_by_the_next_run(self):
        """`run` shares two small files with its app (cli/run_files.h): the registry of traces in $TMPDIR and the
        event counters in /dev/shm (else $TMPDIR). A run that is SIGKILLed cannot remove them; the next run removes
        those of every run that no longer exists, and leaves a live run's alone."""
        tmp = self.path("tmp")
        os.mkdir(tmp)
        env = dict(os.environ, TMPDIR=tmp)
        killed = subprocess.Popen([CLI, "run", "-q", "-o", self.path("killed.db"), "--", "sleep", "60"], env=env,
                                  start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        live = subprocess.Popen([CLI, "run", "-q", "-o", self.path("live.db"), "--", "sleep", "60"], env=env,
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        folders = [tmp] + (["/dev/shm"] if os.access("/dev/shm", os.W_OK) else [])

        def files_of(run):
            return sorted(f for folder in folders for f in glob.glob(f"{folder}/gpumemtrace-*-{run.pid}-??????"))

        try:
            wait_for(lambda: len(files_of(killed)) == 2 and len(files_of(live)) == 2, what="both runs' files")
            os.killpg(killed.pid, signal.SIGKILL)  # the run and its app
            killed.wait()
            left = files_of(killed)
            self.assertEqual(len(left), 2, left)
            result = run_cli("run", "-q", "-o", self.path("next.db"), "--", "true", env={"TMPDIR": tmp})
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(files_of(killed), [], "the killed run's files are still there")
            self.assertEqual(len(files_of(live)), 2, "a live run's files were removed")
        finally:
            for run in (killed, live):
                try:
                    os.killpg(run.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                run.wait()
            for leftover in files_of(live):
                os.unlink(leftover)


if __name__ == "__main__":
    unittest.main()
