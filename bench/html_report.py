#!/usr/bin/env python3
"""Size and render time of the HTML report for big traces (issue 5: under 5 MB and under 3 s to render in
headless chromium for a 10-million-event trace; issue 38, with the interactive viewer: under 10 MB and first paint
under 3 s). For each event count:
- records the `threaded` sample (8 threads of alloc+free pairs) under the simulated runtime, --no-symbolize;
- `report --format html`: seconds, and the page's size;
- opens the page in headless chromium (--dump-dom): the render time the page measures itself (navigation
  start to every plot and table built, body[data-render-ms]), the same up to the interactive viewer drawn
  (body[data-viewer-ms]: its timeline, flamegraph, segment map and findings; the first paint follows it), and the
  wall time of the whole browser run (start-up included);
- `report --format perfetto`: the JSON's size (single allocations as slices, bounded by --max-allocations).

Usage: bench/html_report.py BUILD_DIR [events ...]   (default 1000000 2000000; 10000000 for the target)
"""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time


def first_paint_ms(browser, page):
    """first-contentful-paint of the page in headless chromium, driven by Playwright (PyPI) when it is installed,
    after the viewer is drawn; None without Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=browser, headless=True,
                                              args=["--no-sandbox", "--disable-gpu"])
        tab = chromium.new_page(viewport={"width": 1300, "height": 1000})
        tab.goto("file://" + page, timeout=120000)
        tab.wait_for_selector("body[data-viewer-ms]", timeout=120000)
        paint = tab.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null")
        chromium.close()
    return paint


def timed(command, env=None):
    start = time.perf_counter()
    result = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, result.stdout


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [1_000_000, 2_000_000]
    cli = os.path.join(build, "bin", "gpumemtrace")
    sample = os.path.join(build, "samples", "threaded")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("bench/html_report.py: chromium is not installed (scripts/install-deps.sh installs it)")
    print(f"{'events':>10} {'record s':>9} {'report s':>9} {'html KiB':>9} {'render ms':>10} {'viewer ms':>10} "
          f"{'browser s':>10} {'paint ms':>9} {'perfetto KiB':>12}")
    with tempfile.TemporaryDirectory(prefix="gmt-bench-html-") as tmp:
        for events in sizes:
            pairs = max(1, events // 16)  # 8 threads, an alloc and a free per pair
            trace = os.path.join(tmp, f"t{events}.db")
            record_s, _ = timed([cli, "run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--",
                                 sample, "8", str(pairs)])
            db = sqlite3.connect(trace)
            recorded = db.execute("SELECT count(*) FROM events").fetchone()[0]
            db.close()
            page = os.path.join(tmp, f"t{events}.html")
            report_s, _ = timed([cli, "report", "--format", "html", "-o", page, trace])
            profile = os.path.join(tmp, "profile")
            browser_s, dom = timed([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                    f"--user-data-dir={profile}", "--dump-dom", "file://" + page])
            rendered = re.search(r'data-render-ms="(\d+)"', dom)
            render_ms = int(rendered.group(1)) if rendered else -1  # -1: the script did not finish
            viewer = re.search(r'data-viewer-ms="(\d+)"', dom)
            viewer_ms = int(viewer.group(1)) if viewer else -1
            paint = first_paint_ms(browser, page)
            paint_text = f"{paint:.0f}" if paint is not None else "-"
            perfetto = os.path.join(tmp, f"t{events}.json")
            timed([cli, "report", "--format", "perfetto", "-o", perfetto, trace])
            perfetto_kib = os.path.getsize(perfetto) / 1024
            os.remove(perfetto)
            print(f"{recorded:>10} {record_s:>9.2f} {report_s:>9.2f} {os.path.getsize(page) / 1024:>9.0f} "
                  f"{render_ms:>10} {viewer_ms:>10} {browser_s:>10.2f} {paint_text:>9} {perfetto_kib:>12.0f}", flush=True)
            os.remove(trace)
    print("(render ms: navigation start to the page's script done, measured by the page; viewer ms: the same to the"
          " interactive viewer drawn; browser s: the whole headless chromium run, start-up included; paint ms:"
          " first-contentful-paint, Playwright)")


if __name__ == "__main__":
    main()
