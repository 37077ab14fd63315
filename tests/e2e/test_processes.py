"""Every process gets its own trace: forked children, exec'ed children, and apps that never touch CUDA."""
import glob
import os
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, report_json, run_cli, sample


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


if __name__ == "__main__":
    unittest.main()
