"""A clean program reports no leaks; many threads at once lose no event, with their times in order."""
import sqlite3
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

    def event_times(self, trace):
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            times = [row[0] for row in db.execute("SELECT time_ns FROM events ORDER BY id")]
        return meta, times

    def test_event_times_come_from_the_stated_clock_within_the_run(self):
        # recorder/event_clock.h: the TSC where the kernel's own clock is the TSC, unless GMT_EVENT_CLOCK says
        # otherwise; either way CLOCK_MONOTONIC ns, between the run's start and end, in recording order.
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            kernel_tsc = f.read().strip() == "tsc"
        for clock_env, expected in ((None, "tsc" if kernel_tsc else "clock_gettime"), ("monotonic", "clock_gettime")):
            with self.subTest(GMT_EVENT_CLOCK=clock_env):
                trace = self.path(f"clock-{clock_env}.db")
                env = {"GMT_EVENT_CLOCK": clock_env} if clock_env else None
                # Long enough for the writer to recalibrate a few times (every ~200 ms).
                result = run_cli("run", "--simulate", "-o", trace, "--", sample("threaded"), "4", "100000", env=env)
                self.assertEqual(result.returncode, 0, result.stderr)
                meta, times = self.event_times(trace)
                self.assertEqual(meta["event_clock"], expected)
                self.assertGreaterEqual(len(times), 4 * (2 * 100000 + 1))
                self.assertEqual(times, sorted(times), "times go forward in recording order")
                self.assertGreaterEqual(times[0], int(meta["start_monotonic_ns"]))
                self.assertLessEqual(times[-1], int(meta["end_monotonic_ns"]))


if __name__ == "__main__":
    unittest.main()
