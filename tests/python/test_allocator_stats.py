"""A framework allocator's own statistics (allocator_stats, schema v6) from the in-process package, with the fake
torch package (tests/python/fixtures/torch, a TEST FIXTURE) under the simulated runtime: the exact rows (figures,
triggers: NVTX range ends at depth 0, the OOM observer, exit, the cadence), nothing before CUDA is initialised or
when switched off, and the report's figures, advice, PyTorch OOM section and diff."""
import json
import os
import sqlite3
import subprocess
import sys
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "torch_stats_app.py")
FIXTURES = os.path.join(HERE, "fixtures")
MiB = 1 << 20
OOM_REQUEST = 1 << 50
CADENCE, RANGE_END, OOM, EXIT = 1, 2, 3, 4


def rows(trace):
    with sqlite3.connect(trace) as db:
        return db.execute("SELECT device, allocator, trigger, in_use_bytes, reserved_bytes, inactive_split_bytes, "
                          "alloc_retries, ooms, request_bytes, time_ns FROM allocator_stats "
                          "ORDER BY time_ns, rowid").fetchall()


class AllocatorStatsTest(TraceDirTestCase):
    def run_app(self, name, *args, env=None, options=()):
        trace = self.path(name + ".db")
        full_env = {"PYTHONPATH": FIXTURES, "FAKE_TORCH_NVTX_LIBRARY": os.environ["FAKE_TORCH_NVTX_LIBRARY"],
                    "GMT_ALLOCATOR_SAMPLE_MS": "600000"}  # no periodic sample unless a test asks for one
        full_env.update(env or {})
        result = run_cli("run", "--simulate", "-q", "-o", trace, *options, "--", sys.executable, APP, *args,
                         env=full_env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("gpumemtrace: the allocator", result.stderr)
        self.assertNotIn("statistics are off", result.stderr)
        return trace, result

    def expected_steps(self, allocator, split_scale=1.0):
        def row(trigger, in_use, reserved, split, retries, ooms, request=None):
            return (0, allocator, trigger, in_use * MiB, reserved * MiB, int(split * MiB * split_scale), retries, ooms,
                    request)
        return [row(RANGE_END, 100, 256, 8, 0, 0), row(RANGE_END, 600, 1024, 300, 2, 0),
                row(OOM, 700, 1024, 200, 3, 1, OOM_REQUEST), row(EXIT, 50, 768, 100, 3, 1)]

    def test_rows_are_exactly_the_allocators_figures_at_each_trigger(self):
        trace, result = self.run_app("steps", "steps")
        self.assertIn("nested range end sampled: False", result.stdout)  # depth 1 ends take no sample
        self.assertIn("caught: CUDA out of memory", result.stdout)      # the app's own handler ran
        self.assertEqual([r[:9] for r in rows(trace)], self.expected_steps(allocator=1))

    def test_expandable_segments_and_cuda_malloc_async_are_named(self):
        trace, _ = self.run_app("expandable", "steps", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        self.assertEqual({r[1] for r in rows(trace)}, {2})
        trace, _ = self.run_app("async", "steps", env={"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync"})
        self.assertEqual({r[1] for r in rows(trace)}, {3})

    def test_cadence_starts_only_once_cuda_is_initialised(self):
        trace, result = self.run_app("cadence", "cadence", env={"GMT_ALLOCATOR_SAMPLE_MS": "20"})
        init_ns = int(result.stdout.split("init_monotonic_ns ")[1].split()[0])
        found = rows(trace)
        cadence = [r for r in found if r[2] == CADENCE]
        self.assertGreaterEqual(len(cadence), 8, found)  # 0.5 s at 20 ms: 25 on an idle machine
        self.assertEqual([r[2] for r in found if r[2] != CADENCE], [EXIT])
        self.assertTrue(all(r[9] >= init_ns for r in found), (init_ns, found[:2]))
        self.assertEqual({r[:6] for r in cadence}, {(0, 1, CADENCE, 5 * MiB, 20 * MiB, 0)})

    def test_a_run_shorter_than_the_device_scan_is_sampled_at_exit(self):
        trace, _ = self.run_app("short", "short", env={"GMT_ALLOCATOR_SAMPLE_MS": "20"})
        self.assertEqual([r[:6] for r in rows(trace) if r[2] == EXIT], [(0, 1, EXIT, 2 * MiB, 4 * MiB, 0)])

    def test_switched_off(self):
        trace, _ = self.run_app("off", "steps", env={"GMT_ALLOCATOR_SAMPLE_MS": "0", "FAKE_TORCH_WAIT": "0"})
        self.assertEqual(rows(trace), [])
        trace, _ = self.run_app("no-hooks", "steps", env={"FAKE_TORCH_WAIT": "0"}, options=("--no-python-hooks",))
        self.assertEqual(rows(trace), [])

    def test_bad_period_is_said_once_and_the_default_used(self):
        trace = self.path("bad.db")
        env = {"PYTHONPATH": FIXTURES, "FAKE_TORCH_NVTX_LIBRARY": os.environ["FAKE_TORCH_NVTX_LIBRARY"],
               "GMT_ALLOCATOR_SAMPLE_MS": "often"}
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sys.executable, APP, "steps", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr.count("GMT_ALLOCATOR_SAMPLE_MS='often' is not a number"), 1, result.stderr)
        self.assertGreaterEqual(len(rows(trace)), 4)

    def test_report_figures_advice_and_oom_section(self):
        trace, _ = self.run_app("report", "steps")
        report = report_json(trace)
        stats = report["allocator_stats"]
        self.assertEqual(stats["samples"], 4)
        [device] = stats["devices"]
        self.assertEqual(device["device"], 0)
        self.assertEqual(device["allocator"], "pytorch_caching")
        self.assertEqual(device["samples_by_trigger"], {"cadence": 0, "range_end": 2, "oom": 1, "exit": 1})
        self.assertEqual(device["peak_reserved_bytes"], 1024 * MiB)
        self.assertEqual(device["peak_in_use_bytes"], 700 * MiB)
        self.assertEqual(device["peak_inactive_split_bytes"], 300 * MiB)
        self.assertEqual(device["reserved_at_peak_inactive_split_bytes"], 1024 * MiB)
        self.assertEqual((device["alloc_retries"], device["ooms"]), (3, 1))
        self.assertEqual((device["in_use_at_end_bytes"], device["reserved_at_end_bytes"], device["cached_at_end_bytes"]),
                         (50 * MiB, 768 * MiB, 718 * MiB))
        self.assertTrue(device["fragmented"])
        self.assertIn("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", device["advice"])
        self.assertEqual(len(device["series"]), 4)

        [oom] = stats["ooms"]
        self.assertEqual(oom["request_bytes"], OOM_REQUEST)
        self.assertEqual((oom["in_use_bytes"], oom["reserved_bytes"], oom["inactive_split_bytes"]),
                         (700 * MiB, 1024 * MiB, 200 * MiB))
        [failure] = report["failures"]  # the CUDA-level cudaMalloc that failed under the OOM
        self.assertEqual(failure["requested_bytes"], OOM_REQUEST)
        self.assertEqual(oom["cuda_failure_event_id"], failure["event_id"])
        self.assertEqual(oom["device_free"], failure["device_free"])
        self.assertIsNotNone(oom["device_free"])
        self.assertEqual(oom["cuda_live_bytes"], 3 * MiB)  # the kept tensor, live then
        self.assertEqual(oom["top_stacks"][0]["bytes"], 3 * MiB)
        python = [f for f in oom["top_stacks"][0]["stack"] if f["python"]]
        self.assertIn("steps", [f["function"] for f in python])

        text = run_cli("report", trace).stdout
        self.assertIn("Framework allocator statistics", text)
        self.assertIn("PyTorch caching allocator on device 0: 4 samples", text)
        self.assertIn("inactive split bytes: peak 300.00 MiB (314572800 B)", text)
        self.assertIn("29% of the 1.00 GiB reserved then", text)
        self.assertIn("alloc retries 3, OOMs 1", text)
        self.assertIn("718.00 MiB is PyTorch's cache of freed blocks, not a leak", text)
        self.assertIn("advice: ", text)
        self.assertIn("PyTorch out of memory (1)", text)
        self.assertIn(f"request 1.00 PiB ({OOM_REQUEST} B)", text)
        self.assertIn("CUDA-level memory live on device 0 then: 3.00 MiB", text)
        for line in ("  reserved    ", "  in use      ", "  CUDA level  "):
            self.assertIn(line, text)

    def test_no_advice_under_expandable_segments_and_diff_shows_both(self):
        base, _ = self.run_app("default", "steps")
        new, _ = self.run_app("expandable", "steps", "0.1", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        [device] = report_json(new)["allocator_stats"]["devices"]
        self.assertEqual(device["allocator"], "pytorch_expandable_segments")
        self.assertFalse(device["fragmented"])
        self.assertIsNone(device["advice"])
        self.assertEqual(device["peak_inactive_split_bytes"], 30 * MiB)

        diff = json.loads(run_cli("diff", "--format", "json", base, new).stdout)
        [entry] = diff["allocators"]
        self.assertEqual(entry["device"], 0)
        self.assertEqual(entry["base"]["allocator"], "PyTorch caching allocator")
        self.assertEqual(entry["new"]["allocator"], "PyTorch caching allocator, expandable segments")
        self.assertEqual((entry["base"]["peak_inactive_split_bytes"], entry["new"]["peak_inactive_split_bytes"]),
                         (300 * MiB, 30 * MiB))
        self.assertEqual(entry["base"]["peak_reserved_bytes"], entry["new"]["peak_reserved_bytes"])
        self.assertEqual((entry["base"]["alloc_retries"], entry["new"]["alloc_retries"]), (3, 3))
        text = run_cli("diff", base, new).stdout
        self.assertIn("Framework allocators (their own statistics)", text)
        self.assertIn("peak inactive split", text)
        self.assertRegex(text, r"peak inactive split\s+300\.00 MiB\s+30\.00 MiB\s+-270\.00 MiB")

    def test_html_page_carries_the_samples(self):
        trace, _ = self.run_app("html", "steps")
        page = self.path("report.html")
        result = run_cli("report", "--format", "html", "-o", page, trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(page) as f:
            html = f.read()
        start = html.index('id="gmt-report-data">') + len('id="gmt-report-data">')
        embedded = json.loads(html[start:html.index("</script>", start)])
        # The page carries every sample; tests/html/test_html_allocator_stats.py checks the drawing in chromium.
        self.assertEqual(len(embedded["allocator_stats"]["devices"][0]["series"]), 4)
        self.assertEqual(embedded["allocator_stats"]["ooms"][0]["request_bytes"], OOM_REQUEST)


if __name__ == "__main__":
    unittest.main()
