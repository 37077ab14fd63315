"""`gpumemtrace diff --format html`, driven in Debian's chromium (headless) by Playwright: two builds of one program
(samples/regressing.cu, under the simulated runtime) on one time axis (a series per run, zoomable), the stacks whose
leaked bytes changed with their user frame and byte change, largest first, filtered by status and opened in the stack
panel; the header's figures read without the script; names from the traces stay text. Exits 77 (ctest: skipped)
without chromium or without Playwright (scripts/install-deps.sh installs both)."""
import shutil
import sqlite3
import sys
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, run_cli, sample
from html_support import browser_environment, require_chromium

BROWSER = require_chromium()
try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print("SKIP: Playwright is not installed (scripts/install-deps.sh: python3 -m pip install playwright)",
          file=sys.stderr)
    sys.exit(77)

KiB = 1 << 10
HOSTILE = '<img src=x onerror="window.__pwned=1">&amp;'


class DiffHtmlTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.traces = {}
        for name in ("regressing_base", "regressing_new"):
            trace = cls.workdir.path(f"{name}.db")
            result = run_cli("run", "-q", "--simulate", "-o", trace, "--", sample(name))
            if result.returncode != 0:
                raise AssertionError(f"{name} failed ({result.returncode}): {result.stderr}")
            cls.traces[name] = trace
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=BROWSER, headless=True,
                                                     args=["--no-sandbox", "--disable-gpu"],
                                                     env=browser_environment())

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()
        cls.playwright.stop()
        cls.workdir.tearDown()

    def open_diff(self, base, new):
        page_path = self.path("diff.html")
        result = run_cli("diff", "--format", "html", "-o", page_path, base, new)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(page_path) as f:
            html = f.read()
        self.assertNotIn("src=\"http", html)  # one file: nothing fetched
        page = self.browser.new_page(viewport={"width": 1300, "height": 1000})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto("file://" + page_path)
        page.wait_for_selector("body[data-diff-drawn]", timeout=60000)
        self.assertEqual(errors, [])
        self.addCleanup(page.close)
        return page, html

    def test_both_runs_and_the_stacks_that_changed(self):
        page, _ = self.open_diff(self.traces["regressing_base"], self.traces["regressing_new"])
        # Both runs drawn on one time axis, each a line through its buckets.
        series = page.locator("#diff-timeline path.series")
        self.assertEqual([series.nth(i).get_attribute("data-run") for i in range(series.count())], ["base", "new"])
        for i in range(2):
            self.assertGreater(int(series.nth(i).get_attribute("data-points")), 1)
            self.assertTrue(series.nth(i).get_attribute("d").startswith("M"))
            self.assertGreater(series.nth(i).bounding_box()["height"], 10)
        svg = page.locator("#diff-timeline svg")
        end = float(svg.get_attribute("data-domain-end"))
        box = svg.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + 100)
        for _ in range(4):
            page.mouse.wheel(0, -400)
        page.wait_for_timeout(300)
        zoomed = float(svg.get_attribute("data-domain-end")) - float(svg.get_attribute("data-domain-start"))
        self.assertLess(zoomed, end / 2)

        # The stacks, largest change first: the workspace leak that grew by one 128 KiB workspace, its user frame
        # and its change in one row.
        rows = page.locator("#diff-stacks tr.stack-row")
        deltas = [abs(int(rows.nth(i).get_attribute("data-delta"))) for i in range(rows.count())]
        self.assertEqual(deltas, sorted(deltas, reverse=True))
        statuses = sorted(rows.nth(i).get_attribute("data-status") for i in range(rows.count()))
        self.assertEqual(statuses, ["gone", "grew", "new", "same"])
        grew = page.locator("#diff-stacks tr.stack-row[data-status='grew']")
        self.assertEqual(int(grew.get_attribute("data-delta")), 128 * KiB)
        self.assertIn("make_workspace", grew.locator("td.user").text_content())
        self.assertEqual(grew.locator("td.delta").text_content(), "+128.00 KiB")
        self.assertIn("regression", grew.locator("td.status").text_content())
        grew.click()
        panel = page.locator("#diff-stack-panel")
        self.assertEqual(panel.get_attribute("data-status"), "grew")
        line = marker_line("regressing.cu", "LEAK-SITE: make_workspace")
        self.assertIn(f"regressing.cu:{line}", panel.text_content())
        self.assertIn("your code: (anonymous namespace)::make_workspace(unsigned long) ", panel.text_content())

        # The status filter shows only the new stack.
        page.locator("button.status-filter[data-status='new']").click()
        visible = [rows.nth(i).get_attribute("data-status") for i in range(rows.count()) if rows.nth(i).is_visible()]
        self.assertEqual(visible, ["new"])
        self.assertIn("cache_results", page.locator("#diff-stacks tr.stack-row[data-status='new'] td.user")
                      .text_content())

        # The header's figures, written without the script: peak +320 KiB, a regression.
        peaks = page.locator("#diff-peaks").text_content()
        self.assertIn(f"+320.00 KiB ({320 * KiB} B)", peaks)
        self.assertIn("REGRESSION", peaks)
        self.assertEqual(page.locator("#diff-regressions li").count(), 5)

    def test_hostile_names_stay_text(self):
        new = self.path("hostile.db")
        shutil.copy(self.traces["regressing_new"], new)
        db = sqlite3.connect(new)
        with db:
            changed = db.execute("UPDATE symbols SET function = ? || function WHERE function LIKE '%cache_results%'",
                                 (HOSTILE,)).rowcount
        db.close()
        self.assertGreater(changed, 0)
        page, html = self.open_diff(self.traces["regressing_base"], new)
        self.assertNotIn("<img src=x", html)
        row = page.locator("#diff-stacks tr.stack-row[data-status='new']")
        # The table's user frame is shortened (template arguments elided); the stack panel has the name as recorded.
        self.assertIn("<...>&amp;(anonymous namespace)::cache_results", row.locator("td.user").text_content())
        row.click()
        self.assertIn(HOSTILE, page.locator("#diff-stack-panel").text_content())
        self.assertEqual(page.locator("#diff-stacks img").count(), 0)
        self.assertIsNone(page.evaluate("window.__pwned"))


if __name__ == "__main__":
    unittest.main()
