"""The HTML report of samples/leaky opened in headless chromium: the script draws the timeline, the leak
table's bytes equal the JSON report's, and hostile names from the trace (a symbol, the command line, an NVTX
range) stay text. Skips (exit 77) when chromium is not installed."""
import json
import os
import re
import sqlite3
import unittest

from gmt_e2e import SOURCE, TraceDirTestCase, report_json, run_cli, sample
from html_support import dump_dom, parse_dom, require_chromium, screenshot

BROWSER = require_chromium()

HOSTILE_SYMBOL = "operator<<<script>alert(1)</script>"
HOSTILE_COMMAND = "./leaky \"--tag=<b>bold</b>\" 'it''s' & <!-- </script><script>alert(2)</script>"
HOSTILE_RANGE = "<img src=x onerror=\"alert(3)\">'step'"


def make_hostile(trace, pc_hex):
    """The innermost frame of the given pc becomes HOSTILE_SYMBOL, the command line HOSTILE_COMMAND, and
    an NVTX range named HOSTILE_RANGE spans 5..10 ms."""
    db = sqlite3.connect(trace)
    with db:
        changed = db.execute("UPDATE symbols SET function = ? WHERE pc = ?", (HOSTILE_SYMBOL, int(pc_hex, 16))).rowcount
        assert changed == 1, f"no symbols row for {pc_hex}"
        db.execute("UPDATE meta SET value = ? WHERE key = 'command_line'", (HOSTILE_COMMAND,))
        start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
        name_id = db.execute("INSERT INTO strings (text) VALUES (?)", (HOSTILE_RANGE,)).lastrowid
        db.execute("INSERT INTO ranges (thread_id, domain_id, name_id, start_ns, end_ns, depth) VALUES (1, 0, ?, ?, ?, 0)",
                   (name_id, start + 5_000_000, start + 10_000_000))
    db.close()


class HtmlReportTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("leaky.db")
        result = run_cli("run", "--simulate", "-o", cls.trace, "--", sample("leaky"))
        assert result.returncode == 0, result.stderr
        before = report_json(cls.trace)
        cls.hostile_leak = next(l for l in before["leaks"] if "load_weights" in (l["stack"][0]["function"] or ""))
        make_hostile(cls.trace, cls.hostile_leak["stack"][0]["pc"])
        cls.report = report_json(cls.trace)
        cls.page = cls.workdir.path("report.html")
        result = run_cli("report", "--format", "html", "-o", cls.page, cls.trace)
        assert result.returncode == 0, result.stderr
        with open(cls.page, encoding="utf-8") as f:
            cls.raw = f.read()
        cls.dom_text = dump_dom(BROWSER, cls.page)
        cls.dom = parse_dom(cls.dom_text)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def element_text(self, opening):
        start = self.raw.index(opening) + len(opening)
        return start, self.raw.index("</script>", start)

    def test_page_is_self_contained(self):
        # The inlined d3 is the vendored file, unchanged (analysis/render/assets/vendor/README.md).
        with open(os.path.join(SOURCE, "analysis", "render", "assets", "vendor", "d3.min.js"), encoding="utf-8") as f:
            d3 = f.read()
        d3_start, d3_end = self.element_text("<script>// https://d3js.org v5.16.0")
        d3_start -= len("// https://d3js.org v5.16.0")
        self.assertEqual(self.raw[d3_start:d3_end], d3)
        # Its URLs are XML namespace names and its own in the license line, never fetched; its one "src=" is in
        # d3.image(), which the viewer never calls (nor anything else that loads: checked below).
        self.assertEqual(set(re.findall(r"https?://[^\s\"'),]*", d3)),
                         {"http://www.w3.org/1999/xhtml", "http://www.w3.org/1999/xlink", "http://www.w3.org/2000/svg",
                          "http://www.w3.org/2000/xmlns/", "http://www.w3.org/XML/1998/namespace",
                          "https://d3js.org"})
        for call in ("d3.image", "d3.json", "d3.csv", "d3.text", "d3.xml", "fetch(", "XMLHttpRequest", "import("):
            self.assertNotIn(call, self.raw[d3_end:])
        # The rest: no URL but the SVG namespace, nothing that loads. The embedded JSON elements are data (names
        # from the trace, such as the hostile range name, may say "src="; their "<" cannot open a tag there:
        # test_embedded_json_cannot_end_its_script): only the markup and code count.
        report_start, report_end = self.element_text('id="gmt-report-data">')
        viewer_start, viewer_end = self.element_text('id="gmt-viewer-data">')
        self.assertLess(report_end, viewer_start)
        self.assertLess(viewer_end, d3_start)
        text = (self.raw[:report_start] + self.raw[report_end:viewer_start] + self.raw[viewer_end:d3_start] +
                self.raw[d3_end:]).replace("http://www.w3.org/2000/svg", "")
        for needle in ("http://", "https://", "<link", "@import", "src="):
            with self.subTest(needle=needle):
                self.assertNotIn(needle, text)

    def test_embedded_json_cannot_end_its_script(self):
        # The end tags of the two data elements, the report's code, d3 and the viewer's code.
        self.assertEqual(self.raw.count("</script"), 5)
        self.assertNotIn("<!--", self.raw)
        start = self.raw.index('id="gmt-report-data">') + len('id="gmt-report-data">')
        embedded = json.loads(self.raw[start:self.raw.index("</script>", start)])
        self.assertEqual(embedded["totals"], self.report["totals"])
        self.assertEqual(embedded["trace"]["command_line"], HOSTILE_COMMAND)
        start, end = self.element_text('id="gmt-viewer-data">')
        viewer = json.loads(self.raw[start:end])
        users = [s["user"] for s in viewer["stacks"].values() if s["user"]]
        self.assertTrue(any(u.startswith(HOSTILE_SYMBOL) for u in users), users)

    def test_script_ran_and_drew_the_timeline(self):
        body = self.dom.find_all("body")[0]
        self.assertEqual(body.attrs.get("data-rendered"), "true")
        plots = {int(svg.attrs["data-device"]): svg for svg in self.dom.find_all("svg", "timeline")}
        series = self.report["timeline"]["series"]
        self.assertEqual(set(plots), {s["device"] for s in series})
        for one in series:
            with self.subTest(device=one["device"], kind=one["memory_kind"]):
                svg = plots[one["device"]]
                self.assertEqual(int(svg.attrs["data-drawn"]), sum(1 for s in series if s["device"] == one["device"]))
                lines = [p for p in svg.find_all("path", "live-max") if p.attrs["data-kind"] == one["memory_kind"]]
                self.assertEqual(len(lines), 1)
                self.assertEqual(int(lines[0].attrs["data-buckets"]), len(one["buckets"]))
                # Two points (start and end of the step) per bucket.
                self.assertEqual(lines[0].attrs["d"].count("L") + 1, 2 * len(one["buckets"]))
        peak_markers = self.dom.find_all("circle", "peak-marker")
        self.assertEqual(len(peak_markers), len(self.report["peak_stacks"]))
        self.assertEqual(len(self.dom.find_all("line", "failure-marker")), len(self.report["failures"]))

    def test_leak_table_equals_the_json_report(self):
        rows = self.dom.find_all("tr", "leak")
        self.assertEqual(len(rows), len(self.report["leaks"]))
        for row, leak in zip(rows, self.report["leaks"]):
            cells = row.find_all("td")
            self.assertEqual(int(cells[1].attrs["data-bytes"]), leak["bytes"])
            self.assertEqual(int(cells[2].text()), leak["count"])
            # The call stack unfolds as the text report shows it (start frames dropped, framework runs folded).
            frames = row.find_all("li")
            self.assertEqual([f.text() for f in frames], leak["stack_view"])
            self.assertLess(len(frames), len(leak["stack"]))  # leaky's stacks end in libc's start frames
        self.assertEqual(sum(int(r.find_all("td")[1].attrs["data-bytes"]) for r in rows),
                         self.report["totals"]["leaked_bytes"])

    def test_hostile_names_are_text(self):
        # The symbol: text of the leak's summary and of its first frame, never an element.
        summaries = [s.text() for s in self.dom.find_all("summary")]
        self.assertTrue(any(s.startswith(HOSTILE_SYMBOL) for s in summaries), summaries)
        self.assertEqual([s.tag for s in self.dom.find_all("script")], ["script"] * 5)
        for tag in ("b", "img"):
            self.assertEqual(self.dom.find_all(tag), [], tag)
        self.assertNotIn("<script>alert", self.dom_text)
        # The command line: the header row and the title.
        info = self.dom.find_all("table")[0]
        self.assertIn(HOSTILE_COMMAND, info.text())
        self.assertEqual(self.dom.find_all("title")[0].text(), "gpumemtrace: " + HOSTILE_COMMAND)

    def test_nvtx_ranges_are_bands_when_the_report_has_them(self):
        if "range_spans" not in self.report:
            self.skipTest("the JSON report has no range_spans")
        bands = self.dom.find_all("rect", "range-band")
        self.assertGreaterEqual(len(bands), 1)
        titles = [t.text() for band in bands for t in band.find_all("title")]
        self.assertTrue(any(HOSTILE_RANGE in t for t in titles), titles)

    def test_screenshot(self):
        png = self.workdir.path("report.png")
        screenshot(BROWSER, self.page, png)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertGreater(os.path.getsize(png), 20_000)  # a blank page of this size is a few KiB


if __name__ == "__main__":
    unittest.main()
