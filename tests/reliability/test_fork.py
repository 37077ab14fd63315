"""fork while the writer holds its lock: one thread allocates without pause while the main thread forks 50
times; each child allocates once and exits normally. No hang, and every child has its own readable,
complete trace with exactly its own allocation."""
import glob
import os
import re
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli
from reliability_util import RELIABILITY_BIN

FORKS = 50


class ForkTest(TraceDirTestCase):
    def test_fork_while_writing(self):
        trace = self.path("parent.db")
        program = os.path.join(RELIABILITY_BIN, "fork_while_writing")
        result = run_cli("run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--", program, str(FORKS),
                         timeout=180)  # a hang fails here
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        children = {int(pid): int(leaked)
                    for pid, leaked in re.findall(r"child pid=(\d+) leaked_bytes=(\d+)", result.stdout)}
        self.assertEqual(len(children), FORKS, result.stdout)
        summary = re.search(r"forks=(\d+) median_fork_us=(\d+) max_fork_us=(\d+) failed_children=(\d+)",
                            result.stdout)
        self.assertEqual(summary.group(4), "0")
        child_traces = glob.glob(self.path("parent.*.db"))
        self.assertEqual(len(child_traces), FORKS, sorted(os.listdir(self.dir)))
        for child_trace in child_traces:
            report = report_json(child_trace)
            pid = report["trace"]["pid"]
            self.assertIn(pid, children)
            self.assertTrue(report["trace"]["complete"], child_trace)
            self.assertEqual(report["totals"]["allocations"], 1, child_trace)
            self.assertEqual(report["totals"]["leaked_bytes"], children[pid], child_trace)
        parent = report_json(trace)
        self.assertTrue(parent["trace"]["complete"])
        self.assertGreater(parent["totals"]["allocations"], 0)
        print(f"{FORKS} forks: median {summary.group(2)} us, longest {summary.group(3)} us "
              "(fork waits for the writer's batch in progress)")


if __name__ == "__main__":
    unittest.main()
