"""leaky under the simulated runtime: exact leaked bytes, counts, leak sites (function and source line)."""
import os
import sqlite3
import unittest

from gmt_e2e import (TraceDirTestCase, find_leak, marker_line, parse_truth, report_json, run_cli, sample)


class LeakyTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("leaky.db")
        cls.run_result = run_cli("run", "--simulate", "-o", cls.trace, "--", sample("leaky"))
        cls.truth = parse_truth(cls.run_result.stdout)
        cls.report = report_json(cls.trace) if cls.run_result.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_app_runs_unchanged(self):
        self.assertEqual(self.run_result.returncode, 0, self.run_result.stderr)
        self.assertEqual(len(self.truth), 1, self.run_result.stdout)
        self.assertIn("SIMULATED", self.run_result.stderr)
        self.assertEqual(os.stat(self.trace).st_mode & 0o777, 0o600)

    def test_totals_equal_the_programs_own_account(self):
        totals = self.report["totals"]
        self.assertEqual(totals["leaked_bytes"], self.truth[0]["leaked_bytes"])
        self.assertEqual(totals["leaked_allocations"], self.truth[0]["leaked_allocations"])
        self.assertEqual(totals["failed_allocations"], self.truth[0]["failed_allocations"])
        # 4 MiB + 3 x 256 KiB + 64 KiB + 512 KiB, written out so that a wrong "truth" line cannot hide a bug
        self.assertEqual(totals["leaked_bytes"], 4194304 + 3 * 262144 + 65536 + 524288)
        self.assertEqual(totals["leaked_allocations"], 6)
        # 6 leaked + 20 temporaries (10 cudaMalloc, 10 cudaMallocAsync), all of which were freed
        self.assertEqual(totals["allocations"], 26)
        self.assertEqual(totals["frees"], 20)
        self.assertTrue(self.report["trace"]["simulated"])
        self.assertTrue(self.report["trace"]["complete"])

    def test_each_leak_site_is_named_with_its_source_line(self):
        expected = {  # function: (bytes, count, api)
            "load_weights": (4194304, 1, "cudaMalloc"),
            "make_workspace": (3 * 262144, 3, "cudaMallocManaged"),
            "stage_host_buffer": (65536, 1, "cudaMallocHost"),
            "async_scratch": (524288, 1, "cudaMallocAsync"),
        }
        self.assertEqual(len(self.report["leaks"]), len(expected))
        for function, (size, count, api) in expected.items():
            with self.subTest(function=function):
                leak = find_leak(self.report, function)
                self.assertEqual(leak["bytes"], size)
                self.assertEqual(leak["count"], count)
                self.assertEqual(leak["apis"], [api])
                top = leak["stack"][0]
                self.assertTrue(top["file"].endswith("samples/leaky.cu"), top)
                self.assertEqual(top["line"], marker_line("leaky.cu", f"LEAK-SITE: {function}"))
                callers = [frame["function"] for frame in leak["stack"]]
                self.assertIn("main", callers)

    def test_leaks_are_sorted_by_bytes(self):
        sizes = [leak["bytes"] for leak in self.report["leaks"]]
        self.assertEqual(sizes, sorted(sizes, reverse=True))

    def test_failed_allocation_is_recorded_with_its_site(self):
        failures = self.report["failures"]
        self.assertEqual(len(failures), 1)
        self.assertEqual(failures[0]["requested_bytes"], 1 << 50)
        self.assertEqual(failures[0]["error_name"], "cudaErrorMemoryAllocation")
        self.assertIsNotNone(failures[0]["device_free"])
        self.assertIn("request_too_much", failures[0]["stack"][0]["function"])
        self.assertEqual(failures[0]["stack"][0]["line"], marker_line("leaky.cu", "FAILED-SITE: request_too_much"))

    def test_text_report_names_the_leaks(self):
        result = run_cli("report", self.trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        for function in ("load_weights", "make_workspace", "stage_host_buffer", "async_scratch"):
            self.assertIn(function, result.stdout)
        self.assertIn("leaky.cu:%d" % marker_line("leaky.cu", "LEAK-SITE: load_weights"), result.stdout)

    def test_top_limits_the_groups(self):
        limited = report_json(self.trace, "--top", "2")
        self.assertEqual(len(limited["leaks"]), 2)
        self.assertEqual(limited["totals"]["leaked_allocations"], 6)

    def test_only_the_trace_is_left(self):
        # The trace is built under a temporary name and moved into place: nothing else remains after the run.
        leftovers = [name for name in os.listdir(os.path.dirname(self.trace)) if ".init-" in name]
        self.assertEqual(leftovers, [])

    def stack_ids_by_kind(self, trace):
        with sqlite3.connect(trace) as db:  # kind 1 = alloc, 2 = free
            rows = db.execute("SELECT kind, count(*), sum(stack_id != 0) FROM events WHERE kind IN (1, 2) "
                              "GROUP BY kind ORDER BY kind").fetchall()
        return {kind: (count, with_stack) for kind, count, with_stack in rows}

    def test_frees_take_no_stack_unless_asked(self):
        by_kind = self.stack_ids_by_kind(self.trace)
        allocs, frees = by_kind[1], by_kind[2]
        self.assertEqual(allocs[1], allocs[0])  # every allocation has its stack
        self.assertGreater(frees[0], 0)
        self.assertEqual(frees[1], 0)
        trace = self.path("free-stacks.db")
        result = run_cli("run", "--simulate", "-q", "--free-stacks", "-o", trace, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)
        by_kind = self.stack_ids_by_kind(trace)
        self.assertEqual(by_kind[2][1], by_kind[2][0])  # every free has one now
        self.assertEqual(report_json(trace)["totals"]["leaked_bytes"], self.truth[0]["leaked_bytes"])


if __name__ == "__main__":
    unittest.main()
