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

        # Used bytes per pool, exact from the events: the custom pool's loop allocations are freed at once, so its
        # peak is the two kept allocations (1 + 2 MiB; a thread's loop allocation is at most 64 KiB), also at the end.
        pools = {p["kind"]: p for p in report["pools"]}
        self.assertEqual(sorted(pools), ["created", "default"])
        created = pools["created"]
        self.assertTrue(created["used_from_events"])
        self.assertEqual(created["allocations"], 2 * (pairs + 1))
        self.assertEqual(created["live_allocations"], 2)
        self.assertEqual((created["peak_used_bytes"], created["end_used_bytes"]), (3 << 20, 3 << 20))
        self.assertEqual(created["peak_used_time_ns"], pool["last_alloc_ns"])  # reached by the later kept one
        current = pools["default"]
        self.assertEqual(current["allocations"], 1)
        self.assertEqual((current["peak_used_bytes"], current["end_used_bytes"]), (3 << 20, 3 << 20))
        text = run_cli("report", trace).stdout
        self.assertIn("\nStream-ordered pools (used: the live requested bytes", text)
        self.assertIn("    used      peak 3.00 MiB at ", text)
        self.assertIn("; 3.00 MiB at the end of the trace (2 of %d allocations live)\n" % (2 * (pairs + 1)), text)

    def test_a_pool_that_grows_fast_is_never_reported_reserving_less_than_it_used(self):
        # The writer samples each pool's reserved bytes after a batch in which it reached a new used peak, and every
        # pool at exit (recorder/pool_peaks.h); the simulated runtime keeps a pool's reservation up to its release
        # threshold (tests/simcuda/README.md).
        trace = self.path("growth.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("pool_growth"))
        self.assertEqual(result.returncode, 0, result.stderr)
        mib = 1 << 20
        report = report_json(trace)
        pools = {p["kind"]: p for p in report["pools"]}
        created = pools["created"]
        self.assertEqual(created["peak_used_bytes"], 150 * mib)
        self.assertGreaterEqual(created["samples"], 2)  # at the used peak, and at exit
        self.assertTrue(created["reserved_sampled"])
        # UINT64_MAX release threshold: everything it reserved is still there at exit, sampled, not derived.
        self.assertEqual(created["sampled_peak_reserved_bytes"], 150 * mib)
        self.assertEqual(created["peak_reserved_bytes"], 150 * mib)
        self.assertFalse(created["peak_reserved_from_used"])
        self.assertEqual(created["last_reserved_bytes"], 150 * mib)
        # The default pool gives back its 4 MiB at the synchronization, mostly before the writer reads it: its reserved
        # peak is then the used peak, said as such (peak_reserved_from_used).
        current = pools["default"]
        self.assertEqual(current["peak_used_bytes"], 4 * mib)
        self.assertEqual(current["peak_reserved_bytes"], 4 * mib)
        self.assertEqual(current["peak_reserved_from_used"], current["sampled_peak_reserved_bytes"] < 4 * mib)
        for pool in report["pools"]:
            self.assertGreaterEqual(pool["peak_reserved_bytes"], pool["peak_used_bytes"], pool)
        text = run_cli("report", trace).stdout
        self.assertRegex(text, r"    reserved  sampled \d+ times: peak at least 150.00 MiB, 150.00 MiB at the last sample")
        self.assertIn("peak at least 4.00 MiB", text)
        self.assertNotIn("not sampled", text)


if __name__ == "__main__":
    unittest.main()
