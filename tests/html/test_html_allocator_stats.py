"""The HTML report of a trace with a framework allocator's own statistics (allocator_stats rows added to the
trace of samples/leaky under the simulated runtime), opened in headless chromium: the allocator's reserved and
in-use lines on device 0's plot beside the CUDA-level curve, the table of its figures, the advice and the PyTorch
out-of-memory row. Skips (exit 77) when chromium is not installed."""
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from html_support import dump_dom, parse_dom, require_chromium

BROWSER = require_chromium()
MiB = 1 << 20
REQUEST = 3 * 1024 * MiB + 123


def add_samples(trace):
    """Four rows on device 0: PyTorch's caching allocator, fragmented at its second row, an OOM at its third."""
    db = sqlite3.connect(trace)
    with db:
        start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
        rows = [(100_000, 2, 10, 64, 4, 0, 0, None), (200_000, 2, 40, 512, 200, 1, 0, None),
                (300_000, 3, 50, 512, 100, 2, 1, REQUEST), (400_000, 4, 5, 256, 50, 2, 1, None)]
        for at, trigger, in_use, reserved, split, retries, ooms, request in rows:
            db.execute("INSERT INTO allocator_stats VALUES (?, 0, 1, ?, ?, ?, ?, ?, ?, ?)",
                       (start + at, trigger, in_use * MiB, reserved * MiB, split * MiB, retries, ooms, request))
    db.close()


class HtmlAllocatorStatsTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("leaky.db")
        result = run_cli("run", "--simulate", "-o", cls.trace, "--", sample("leaky"))
        assert result.returncode == 0, result.stderr
        add_samples(cls.trace)
        cls.report = report_json(cls.trace)
        cls.page = cls.workdir.path("report.html")
        result = run_cli("report", "--format", "html", "-o", cls.page, cls.trace)
        assert result.returncode == 0, result.stderr
        cls.dom = parse_dom(dump_dom(BROWSER, cls.page))

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_allocator_lines_on_the_devices_plot(self):
        plots = {int(svg.attrs["data-device"]): svg for svg in self.dom.find_all("svg", "timeline")}
        svg = plots[0]
        lines = svg.find_all("path", "allocator-line")
        self.assertEqual(sorted(line.attrs["data-figure"] for line in lines), ["in_use_bytes", "reserved_bytes"])
        for line in lines:
            self.assertEqual(int(line.attrs["data-samples"]), 4)
            self.assertEqual(line.attrs["d"].count("L") + 1, 2 * 4)  # a step per sample
        cuda_series = sum(1 for s in self.report["timeline"]["series"] if s["device"] == 0)
        self.assertEqual(int(svg.attrs["data-drawn"]), cuda_series + 2)
        self.assertEqual(len(svg.find_all("path", "live-max")), cuda_series)  # the CUDA-level curve is still there

    def test_table_advice_and_oom(self):
        [row] = self.dom.find_all("tr", "allocator-device")
        cells = row.find_all("td")
        self.assertEqual(cells[1].text(), "PyTorch caching allocator")
        self.assertEqual(int(cells[3].attrs["data-bytes"]), 512 * MiB)   # peak reserved
        self.assertEqual(int(cells[5].attrs["data-bytes"]), 200 * MiB)   # peak inactive split
        self.assertEqual(int(cells[8].attrs["data-bytes"]), 251 * MiB)   # cached at the end
        [advice] = self.dom.find_all("p", "allocator-advice")
        self.assertIn("expandable_segments:True", advice.text())
        [oom] = self.dom.find_all("tr", "allocator-oom")
        self.assertEqual(int(oom.find_all("td")[2].attrs["data-bytes"]), REQUEST)
        self.assertEqual(self.report["allocator_stats"]["ooms"][0]["request_bytes"], REQUEST)


if __name__ == "__main__":
    unittest.main()
