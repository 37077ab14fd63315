"""Stream-ordered allocations from two threads, a custom pool and the default pool, under the simulated
runtime (runtime backend): exact counts, leak sites and the backend recorded in the trace."""
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, marker_line, parse_truth, report_json, run_cli, sample


class AsyncPoolsTest(TraceDirTestCase):
    def test_pools_from_two_threads(self):
        pairs = 500
        trace = self.path("pools.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("async_pools"), str(pairs))
        self.assertEqual(result.returncode, 0, result.stderr)
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace)
        totals = report["totals"]
        self.assertEqual(report["trace"]["backend"], "runtime")
        self.assertEqual(totals["allocations"], 2 * (pairs + 1) + 1)
        self.assertEqual(totals["frees"], 2 * pairs)
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        pool = find_leak(report, "pool_leak")
        self.assertEqual((pool["bytes"], pool["count"]), (3 << 20, 2))
        self.assertEqual(pool["apis"], ["cudaMallocFromPoolAsync"])
        self.assertEqual(pool["stack"][0]["line"], marker_line("async_pools.cu", "LEAK-SITE: pool_leak"))
        default = find_leak(report, "default_pool_leak")
        self.assertEqual((default["bytes"], default["apis"]), (3 << 20, ["cudaMallocAsync"]))


if __name__ == "__main__":
    unittest.main()
