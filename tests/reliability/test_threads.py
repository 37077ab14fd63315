"""16 threads x 100k allocations and frees at once: counts and live bytes exact, no deadlock."""
import time
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, parse_truth, report_json, run_cli, sample

THREADS = 16
PAIRS = 100000


class ThreadsTest(TraceDirTestCase):
    def test_sixteen_threads_hundred_thousand_pairs_each(self):
        trace = self.path("threads.db")
        start = time.monotonic()
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sample("threaded"), str(THREADS), str(PAIRS),
                         timeout=240)
        elapsed = time.monotonic() - start
        self.assertEqual(result.returncode, 0, result.stderr)
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace)
        totals = report["totals"]
        self.assertTrue(report["trace"]["complete"])
        self.assertEqual(report["trace"]["dropped_events"], 0)
        self.assertEqual(totals["allocations"], THREADS * (PAIRS + 1))
        self.assertEqual(totals["frees"], THREADS * PAIRS)
        self.assertEqual(totals["unmatched_frees"], 0)
        self.assertEqual(totals["inconsistencies"], 0)
        self.assertEqual(report["trace"]["event_count"], THREADS * (PAIRS + 1) + THREADS * PAIRS)
        self.assertEqual(totals["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(totals["leaked_allocations"], THREADS)
        self.assertEqual(find_leak(report, "worker")["count"], THREADS)
        print(f"{THREADS} threads x {PAIRS} pairs: run + symbolize {elapsed:.1f} s")


if __name__ == "__main__":
    unittest.main()
