"""Fragmentation inside an NVTX-memory-API heap (docs/analysis.md "Fragmentation inside heaps"): samples/nvtx_heap
under the simulated runtime. Exact holes, the live blocks that pin them at the heap's peak and at the end (bytes,
blocks, the user's function and line), and the heap over time in the JSON report.

What the sample's arena (one 1 MiB heap) holds: at the peak of its blocks, e (65536 at 0, kept at exit by
keep_region), f (1000 at 65536) and g (3000 at 66560, f and g from one hand_out call): 69536 held, holes of 24 and
979016 bytes. At the end e alone: 983040 free in one hole, pinned by e."""
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, report_json, run_cli, sample

ARENA = 1 << 20
NVTX_MEMORY = 5  # schema::Source
E, F, G = 65536, 1000, 3000
PEAK_HELD = E + F + G


def frames_named(group, function):
    return [f for f in group["stack"] if f["function"] and function in f["function"]]


class HeapFragmentationTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("heap.db")
        result = run_cli("run", "-q", "--simulate", "-o", cls.trace, "--", sample("nvtx_heap"))
        assert result.returncode == 0, result.stderr
        cls.report = report_json(cls.trace)
        [cls.heap] = cls.report["heap_fragmentation"]
        text = run_cli("report", cls.trace)
        assert text.returncode == 0, text.stderr
        cls.text = text.stdout

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def assert_names_site(self, group, function, marker):
        """The group's stack names `function` at its marked line (also where NVTX's call is inlined into it at -O2:
        the frame is the function's, so the line is its call site, not NVTX's header), and that frame is the user's
        frame the report shows."""
        [frame] = frames_named(group, function)[:1]
        self.assertTrue(frame["file"].endswith("nvtx_heap.cu"), frame["file"])
        self.assertEqual(frame["line"], marker_line("nvtx_heap.cu", marker))
        self.assertIn(function + "(", group["user_frame"])  # "(anonymous namespace)::keep_region(...) ..."
        self.assertIn(f"{frame['file'].rsplit('/', 1)[-1]}:{frame['line']}", group["user_frame"])

    def test_holes_at_the_peak_and_at_the_end(self):
        heap = self.heap
        self.assertEqual(heap["allocator"], "an NVTX-memory-API heap")
        self.assertEqual(heap["device"], 0)
        self.assertEqual(heap["peak_held_bytes"], PEAK_HELD)
        self.assertEqual(heap["at_peak"], {"segments": 1, "reserved_bytes": ARENA, "held_bytes": PEAK_HELD,
                                           "free_bytes": ARENA - PEAK_HELD,
                                           "largest_free_bytes": ARENA - (66560 + G)})
        self.assertEqual(heap["at_end"], {"segments": 1, "reserved_bytes": ARENA, "held_bytes": E,
                                          "free_bytes": ARENA - E, "largest_free_bytes": ARENA - E})

    def test_blocks_pinning_at_the_peak(self):
        kept, handed = self.heap["pinned_at_peak"]  # as much free pinned by both: the more bytes held first
        self.assertEqual((kept["blocks"], kept["bytes"], kept["segments"], kept["free_bytes"]),
                         (1, E, 1, ARENA - PEAK_HELD))
        self.assertEqual((handed["blocks"], handed["bytes"], handed["segments"], handed["free_bytes"]),
                         (2, F + G, 1, ARENA - PEAK_HELD))
        self.assert_names_site(kept, "keep_region", "KEEP-SITE")
        self.assert_names_site(handed, "hand_out", "REGION-SITE")

    def test_blocks_pinning_at_the_end(self):
        [kept] = self.heap["pinned_at_end"]  # the scratch heap is gone; the arena is pinned by e alone
        self.assertEqual((kept["blocks"], kept["bytes"], kept["segments"], kept["free_bytes"]), (1, E, 1, ARENA - E))
        self.assert_names_site(kept, "keep_region", "KEEP-SITE")

    def test_over_time(self):
        heap = self.heap
        width = heap["bucket_ns"]
        series = heap["over_time"]
        self.assertGreater(width, 0)
        self.assertLessEqual(len(series), 1000)
        # From the process start to the end of the trace, the last bucket holding its end.
        duration = self.report["trace"]["duration_ns"]
        self.assertEqual(len(series), duration // width + 1)
        for i, bucket in enumerate(series):
            with self.subTest(bucket=i):
                self.assertEqual(bucket["time_ns"], i * width)
                self.assertEqual(bucket["free_bytes"], bucket["reserved_bytes"] - bucket["held_bytes"])
                self.assertLessEqual(bucket["largest_free_bytes"], bucket["free_bytes"])
                self.assertIn(bucket["reserved_bytes"], (0, ARENA, ARENA + (64 << 10)))  # the arena, and scratch
        at_end = {k: v for k, v in heap["at_end"].items() if k != "segments"}
        # Before the bucket of the heap's first event (its arena registered) nothing is reserved; from the bucket of
        # its last (the scratch heap unregistered) every bucket is the heap at the end.
        first, last = self.heap_event_times()
        self.assertTrue(all(b["reserved_bytes"] == 0 for b in series[:first // width]))
        for bucket in series[last // width:]:
            self.assertEqual({k: v for k, v in bucket.items() if k != "time_ns"}, at_end)

    def heap_event_times(self):
        with sqlite3.connect(self.trace) as db:
            start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
            first, last = db.execute(f"SELECT min(time_ns), max(time_ns) FROM events WHERE source = {NVTX_MEMORY}"
                                     ).fetchone()
        return first - start, last - start

    def test_text(self):
        keep = self.heap["pinned_at_end"][0]["user_frame"]
        self.assertIn("\n  an NVTX-memory-API heap on device 0\n", self.text)
        self.assertIn("      holes pinned by live blocks (in segments with free bytes), most free first:\n"
                      f"        {'64.00 KiB in 1 block pins 960.00 KiB free in 1 segment':<52} at {keep}\n", self.text)
        self.assertIn("\n    over time (0 to ", self.text)
        self.assertIn("\n      free in holes  ", self.text)


if __name__ == "__main__":
    unittest.main()
