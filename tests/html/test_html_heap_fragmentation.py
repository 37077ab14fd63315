"""The HTML report of samples/nvtx_heap (an NVTX-memory-API heap) under the simulated runtime, opened in headless
chromium: the fragmentation section's tables of the live blocks pinning the heap's holes (at its peak and at the
end, with the stacks that hold them) and of the heap over time. Skips (exit 77) when chromium is not installed."""
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from html_support import dump_dom, parse_dom, require_chromium

BROWSER = require_chromium()
ARENA = 1 << 20


class HtmlHeapFragmentationTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("heap.db")
        result = run_cli("run", "-q", "--simulate", "-o", cls.trace, "--", sample("nvtx_heap"))
        assert result.returncode == 0, result.stderr
        cls.report = report_json(cls.trace)
        cls.page = cls.workdir.path("report.html")
        result = run_cli("report", "--format", "html", "-o", cls.page, cls.trace)
        assert result.returncode == 0, result.stderr
        cls.dom = parse_dom(dump_dom(BROWSER, cls.page))

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_pinning_table(self):
        [table] = self.dom.find_all("table", "heap-pins")
        rows = [[cell for cell in row.find_all("td")] for row in table.find_all("tbody")[0].find_all("tr")]
        [heap] = self.report["heap_fragmentation"]
        expected = [("at its peak", group) for group in heap["pinned_at_peak"]] + \
                   [("at the end", group) for group in heap["pinned_at_end"]]
        self.assertEqual(len(rows), len(expected))
        self.assertEqual(len(rows), 3)  # e, and f with g, at the peak; e at the end
        for cells, (moment, group) in zip(rows, expected):
            self.assertEqual(cells[0].text(), moment)
            self.assertEqual(int(cells[1].text()), group["blocks"])
            self.assertEqual(int(cells[2].attrs["data-bytes"]), group["bytes"])
            self.assertEqual(int(cells[4].attrs["data-bytes"]), group["free_bytes"])
            self.assertIn(group["user_frame"], cells[5].text())
        self.assertEqual(int(rows[2][4].attrs["data-bytes"]), ARENA - 65536)
        self.assertIn("keep_region(", rows[2][5].text())

    def test_over_time_table(self):
        [table] = self.dom.find_all("table", "heap-over-time")
        rows = table.find_all("tbody")[0].find_all("tr")
        [heap] = self.report["heap_fragmentation"]
        self.assertEqual(len(rows), min(12, len(heap["over_time"])))
        # Each row a stretch of buckets and, in it, the first bucket with the most free bytes in holes.
        series = heap["over_time"]
        for i, row in enumerate(rows):
            stretch = series[i * len(series) // len(rows):(i + 1) * len(series) // len(rows)]
            best = max(stretch, key=lambda b: b["free_bytes"])  # max() keeps the first of equals
            cells = row.find_all("td")
            self.assertEqual([int(cells[k].attrs["data-bytes"]) for k in (2, 3, 4, 5)],
                             [best["reserved_bytes"], best["held_bytes"], best["free_bytes"], best["largest_free_bytes"]])
        # The arena is reserved at the end of the run, and e holds 64 KiB of it.
        last = rows[-1].find_all("td")
        self.assertIn(int(last[2].attrs["data-bytes"]), (ARENA, ARENA + (64 << 10)))
        self.assertGreaterEqual(int(last[4].attrs["data-bytes"]), ARENA - 65536)

if __name__ == "__main__":
    unittest.main()
