"""A clean program reports no leaks; many threads at once lose no event."""
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, marker_line, parse_truth, report_json, run_cli, sample


class NoLeaksTest(TraceDirTestCase):
    def test_program_that_frees_everything_has_no_leaks(self):
        trace = self.path("no_leaks.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("no_leaks"))
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        totals = report["totals"]
        self.assertEqual(totals["leaked_bytes"], 0)
        self.assertEqual(totals["leaked_allocations"], 0)
        self.assertEqual(report["leaks"], [])
        # 20 steps x 6 allocation APIs (cudaMalloc, Managed, HostAlloc, Pitch, 3D, Async), each freed
        self.assertEqual(totals["allocations"], 120)
        self.assertEqual(totals["frees"], 120)
        self.assertEqual(totals["unmatched_frees"], 0)
        self.assertIn("no leaks", result.stderr)


class ThreadsTest(TraceDirTestCase):
    def test_eight_threads_lose_no_event(self):
        threads, pairs = 8, 10000
        trace = self.path("threaded.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("threaded"), str(threads), str(pairs))
        self.assertEqual(result.returncode, 0, result.stderr)
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace)
        totals = report["totals"]
        self.assertEqual(totals["allocations"], threads * (pairs + 1))
        self.assertEqual(totals["frees"], threads * pairs)
        self.assertEqual(totals["unmatched_frees"], 0)
        self.assertEqual(totals["leaked_allocations"], truth["leaked_allocations"])
        self.assertEqual(totals["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(totals["leaked_bytes"], sum((t + 1) * 1024 for t in range(threads)))
        leak = find_leak(report, "worker")
        self.assertEqual(leak["count"], threads)
        self.assertEqual(leak["stack"][0]["line"], marker_line("threaded.cu", "LEAK-SITE: worker"))


if __name__ == "__main__":
    unittest.main()
