"""The HTML report's interactive viewer, driven in Debian's chromium (headless) by Playwright: zooms the timeline with
the mouse wheel and reads the window it shows, clicks a layer and an allocation and reads the stack panel, switches
the flamegraph and checks its bytes against the trace, opens the segment map of a fragmented heap at a chosen moment
and clicks a block, follows a finding; names from the trace stay text. Traces: the PyTorch-shaped fixture
(torch_shaped_trace.py) and samples/nvtx_heap (an NVTX-memory-API heap left with holes), under the simulated runtime.
Exits 77 (ctest: skipped) without chromium or without Playwright (scripts/install-deps.sh installs both)."""
import json
import sys
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from html_support import browser_environment, require_chromium
from torch_shaped_trace import A, MIB, make_torch_shaped_trace

BROWSER = require_chromium()
try:
    from playwright.sync_api import sync_playwright
except ImportError:
    print("SKIP: Playwright is not installed (scripts/install-deps.sh: python3 -m pip install playwright)",
          file=sys.stderr)
    sys.exit(77)

HOSTILE = '<img src=x onerror="window.__pwned=1">&amp;'


class ViewerTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.playwright = sync_playwright().start()
        cls.browser = cls.playwright.chromium.launch(executable_path=BROWSER, headless=True,
                                                     args=["--no-sandbox", "--disable-gpu"],
                                                     env=browser_environment())

    @classmethod
    def tearDownClass(cls):
        cls.browser.close()
        cls.playwright.stop()

    def open_report(self, trace, *extra):
        page_path = trace + ".html"
        result = run_cli("report", "--format", "html", "-o", page_path, *extra, trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        page = self.browser.new_page(viewport={"width": 1300, "height": 1000})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto("file://" + page_path)
        page.wait_for_selector("body[data-viewer-ms]", timeout=60000)
        self.assertEqual(errors, [])
        self.addCleanup(page.close)
        return page

    def domain(self, page):
        svg = page.locator("#viewer-timeline svg")
        return float(svg.get_attribute("data-domain-start")), float(svg.get_attribute("data-domain-end"))

    def viewer_data(self, page):
        return json.loads(page.locator("#gmt-viewer-data").text_content())

    def test_zoom_layers_stack_panel_and_flamegraph(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        report = report_json(trace)
        page = self.open_report(trace)

        # Zoom with the wheel over the plot: the window shrinks around the pointer.
        start, end = self.domain(page)
        self.assertEqual(start, 0)
        box = page.locator("#viewer-timeline svg").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 100)
        for _ in range(5):
            page.mouse.wheel(0, -400)
        page.wait_for_timeout(300)
        zoomed = self.domain(page)
        self.assertLess(zoomed[1] - zoomed[0], (end - start) / 2)
        page.locator("#viewer-zoom-reset").click()
        page.wait_for_function("document.querySelector('#viewer-timeline svg').getAttribute('data-domain-start') === '0'")
        self.assertEqual(self.domain(page), (0, end))

        # The layers are the top stacks; the largest at its highest is the library's 8 MiB buffer.
        layers = page.locator("#viewer-timeline path.layer")
        stacks = [layers.nth(i).get_attribute("data-stack") for i in range(layers.count())]
        data = self.viewer_data(page)
        first = data["stacks"][stacks[0]]
        self.assertTrue(first["user"].startswith("nccl_buffer"))
        layers.nth(0).dispatch_event("click")
        panel = page.locator("#stack-panel")
        self.assertEqual(panel.get_attribute("data-stack"), stacks[0])
        self.assertIn("your code: nccl_buffer", panel.text_content())
        self.assertIn("8.00 MiB", panel.text_content())

        # A single allocation: the 1 MiB block at A + 6 MiB (forward_activations), clicked with the mouse.
        block = page.locator(f"#viewer-timeline rect.alloc[data-size='{1 * MIB}']").first
        block.click()
        self.assertIn("forward_activations", panel.text_content())
        self.assertIn("block 1.00 MiB", panel.text_content())

        # The flamegraph: switched with its buttons; the root holds each weight's bytes.
        flame = page.locator("#flamegraph")
        self.assertEqual(flame.get_attribute("data-mode"), "peak")
        page.locator(".flame-mode[data-mode='leaked']").click()
        self.assertEqual(flame.get_attribute("data-mode"), "leaked")
        root = page.locator("#flamegraph g.flame-node[data-name='all']")
        self.assertEqual(int(root.get_attribute("data-bytes")), report["totals"]["leaked_bytes"])
        page.locator(".flame-mode[data-mode='allocated']").click()
        allocated = (3 + 3 + 1 + 0.5 + 1 + 8 + 4 + 1) * MIB  # the fixture's blocks and CUDA memory behind no heap
        self.assertEqual(int(root.get_attribute("data-bytes")), allocated)
        page.locator("#flamegraph g.flame-node[data-name='alloc_weights']").first.click()
        self.assertIn("alloc_weights", panel.text_content())

    def test_segment_map_of_a_fragmented_heap(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        page = self.open_report(trace)
        moments = page.locator("#moment-select option")
        labels = [moments.nth(i).text_content() for i in range(moments.count())]
        self.assertTrue(labels[-1].startswith("end"), labels)
        page.locator("#moment-select").select_option(str(len(labels) - 1))
        segments = page.locator("#segment-map g.segment")
        self.assertEqual(segments.count(), 1)  # the small segment was given back before the end
        self.assertEqual(segments.first.get_attribute("data-address"), hex(A))
        sizes = [(r.get_attribute("class"), int(r.get_attribute("data-size")))
                 for r in segments.first.locator("rect.block").all()]
        self.assertEqual(sizes, [("block held", 3 * MIB), ("block hole", 3 * MIB), ("block held", 1 * MIB),
                                 ("block hole", 13 * MIB)])
        self.assertIn("the largest hole 13.00 MiB", page.locator("#segment-summary").text_content())
        segments.first.locator("rect.block").nth(2).click()
        self.assertIn("forward_activations", page.locator("#stack-panel").text_content())

    def test_nvtx_heap_sample(self):
        trace = self.path("heap.db")
        result = run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("nvtx_heap"))
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        page = self.open_report(trace)
        [heap] = report["heap_fragmentation"]
        options = page.locator("#moment-select option")
        self.assertGreaterEqual(options.count(), 2)
        page.locator("#moment-select").select_option(str(options.count() - 1))
        holes = page.locator("#segment-map rect.block.hole")
        self.assertGreater(holes.count(), 0)
        held = sum(int(r.get_attribute("data-size")) for r in page.locator("#segment-map rect.block.held").all())
        self.assertEqual(held, report["totals"]["leaked_bytes"])
        # The findings panel: a click shows the finding's stack.
        findings = page.locator("#findings-panel li.finding")
        self.assertEqual(findings.count(), len(report["findings"]))
        findings.first.click()
        self.assertIn(report["findings"][0]["verdict"], page.locator("#stack-panel").text_content())

    def test_hostile_names_stay_text(self):
        trace = self.path("hostile.db")
        make_torch_shaped_trace(trace, hostile_name=HOSTILE)
        page = self.open_report(trace)
        page.locator(f"#viewer-timeline rect.alloc[data-size='{1 * MIB}']").first.click()
        self.assertIn(HOSTILE, page.locator("#stack-panel").text_content())
        page.locator(".flame-mode[data-mode='leaked']").click()
        self.assertGreater(page.locator("#flamegraph g.flame-node").count(), 1)
        legend = page.locator("#layer-legend").text_content()
        self.assertIn(HOSTILE, legend)
        self.assertEqual(page.locator("#viewer img").count(), 0)
        self.assertIsNone(page.evaluate("window.__pwned"))


if __name__ == "__main__":
    unittest.main()
