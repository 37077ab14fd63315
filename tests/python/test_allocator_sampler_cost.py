"""The allocator statistics sampler's cost bound (python/gpumemtrace_inprocess/allocator_stats.py), without a
framework or the native library: NVTX ranges end every millisecond and each sample costs a known amount of CPU.
Range-end samples must keep at most 1/COST_FACTOR of the time (on the H200 one sample per 4.5 ms step cost the
step 2-3%), cheap samples must still follow the ranges at MIN_GAP_S, and the cadence must not add samples
right after a range-end one."""
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from gpumemtrace_inprocess import allocator_stats  # noqa: E402
from gpumemtrace_inprocess.allocator_stats import CADENCE, RANGE_END, Sampler  # noqa: E402


class BusySource:
    """One device whose statistics cost `cost_s` of this thread's CPU time (a busy loop, as a C call holding the
    GIL would)."""
    name = "busy"
    allocator = 1
    started = False

    def __init__(self, cost_s):
        self.cost_s = cost_s

    def ready(self):
        return True

    def start(self):
        pass

    def devices_now(self, now, rescan=False):
        return [0]

    def stats(self, device):
        end = time.thread_time() + self.cost_s
        while time.thread_time() < end:
            pass
        return (1, 2, 0, 0, 0)


class RangesEveryMillisecond:
    """gmt_top_level_range_ends and gmt_wait_top_level_range_end for an app whose steps take 1 ms."""

    def __init__(self):
        self.start = time.monotonic()

    def ends(self):
        return int((time.monotonic() - self.start) * 1000)

    def wait(self, seen, timeout_ms):
        deadline = time.monotonic() + timeout_ms / 1000
        while self.ends() == seen and time.monotonic() < deadline:
            time.sleep(0.0005)
        return self.ends()


def run_sampler(cost_s, seconds, period_ms=100):
    triggers = []
    ranges = RangesEveryMillisecond()
    sampler = Sampler(lambda device, allocator, trigger, *figures: triggers.append((time.monotonic(), trigger)),
                      ranges.ends, ranges.wait, period_ms)
    sampler.add(BusySource(cost_s))
    time.sleep(seconds)
    sampler.stopped = True
    sampler.thread.join(5)
    return triggers


class SamplerCostTest(unittest.TestCase):
    def test_costly_samples_are_spaced_by_their_cost(self):
        cost_s = 0.002  # 400 x 2 ms: at most one range-end sample per 0.8 s
        triggers = run_sampler(cost_s, 2.0)
        range_end = [t for t, trigger in triggers if trigger == RANGE_END]
        # Ranges end every millisecond: at the fixed 10 ms gap this was ~150 samples, 30% of the time.
        self.assertLessEqual(len(range_end), 3, triggers)
        gaps = [b - a for a, b in zip(range_end, range_end[1:])]
        self.assertTrue(all(g >= allocator_stats.COST_FACTOR * cost_s * 0.95 for g in gaps), gaps)
        # The cadence (100 ms) still samples between them.
        self.assertGreaterEqual(len([t for t, trigger in triggers if trigger == CADENCE]), 5, triggers)

    def test_cheap_samples_follow_the_ranges(self):
        triggers = run_sampler(0.00001, 1.0)
        range_end = [t for t, trigger in triggers if trigger == RANGE_END]
        self.assertGreaterEqual(len(range_end), 20, len(range_end))  # ~90 at one per 10 ms, on an idle machine
        gaps = [b - a for a, b in zip(range_end, range_end[1:])]
        self.assertTrue(all(g >= allocator_stats.MIN_GAP_S * 0.95 for g in gaps), min(gaps))
        # Range-end samples come more often than the cadence, which therefore never samples.
        self.assertLessEqual(len([t for t, trigger in triggers if trigger == CADENCE]), 2, triggers)


if __name__ == "__main__":
    unittest.main()
