"""CI gates under the simulated runtime: report --fail-on-leak/--fail-on-growth exit codes, suppressions files
(matched, unused, malformed), breakdowns by thread/stream/module, and `diff` of two builds of one program
(samples/regressing.cu) with exact bytes and statuses; exit codes 0, 1 and 2."""
import json
import os
import shutil
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, parse_truth, run_cli, sample

KiB = 1 << 10
MiB = 1 << 20
LEAKY_LEAKED = 4 * MiB + 3 * 256 * KiB + 64 * KiB + 512 * KiB  # 5570560, samples/leaky.cu


class CiTestCase(TraceDirTestCase):
    """Profiles each sample once for the whole class."""

    SAMPLES = ()

    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.traces = {}
        cls.truths = {}
        for name in cls.SAMPLES:
            trace = cls.workdir.path(f"{name}.db")
            result = run_cli("run", "--simulate", "-o", trace, "--", sample(name))
            if result.returncode != 0:
                raise AssertionError(f"{name} failed ({result.returncode}): {result.stderr}")
            cls.traces[name] = trace
            cls.truths[name] = parse_truth(result.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def write(self, name, text):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def report(self, trace, *args):
        return run_cli("report", "--format", "json", *args, trace)


class ReportGatesTest(CiTestCase):
    SAMPLES = ("leaky", "no_leaks", "steady_state", "slow_leak")

    def test_fail_on_leak_writes_the_report_then_exits_1(self):
        result = self.report(self.traces["leaky"], "--fail-on-leak")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(json.loads(result.stdout)["totals"]["leaked_bytes"], LEAKY_LEAKED)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("--fail-on-leak failed: 5.31 MiB (5570560 B) leaked in 6 allocations from 4 call stacks", lines[0])
        self.assertIn("(5.31 MiB (5570560 B) over the allowed 0 B)", lines[0])

    def test_fail_on_leak_threshold_is_exclusive(self):
        trace = self.traces["leaky"]
        self.assertEqual(self.report(trace, f"--fail-on-leak={LEAKY_LEAKED}").returncode, 0)
        below = self.report(trace, f"--fail-on-leak={LEAKY_LEAKED - 1}")
        self.assertEqual(below.returncode, 1)
        self.assertIn("(1 B over the allowed", below.stderr)
        self.assertEqual(self.report(trace, "--fail-on-leak=5MiB").returncode, 1)
        self.assertEqual(self.report(trace, "--fail-on-leak=6MiB").returncode, 0)
        self.assertEqual(self.report(trace, "--fail-on-leak=lots").returncode, 2)

    def test_no_leak_passes_the_gate(self):
        result = self.report(self.traces["no_leaks"], "--fail-on-leak", "--fail-on-growth")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")

    def test_jax_arena_is_cached_and_keeps_the_gate_from_passing(self):
        # The no-leak sample's trace plus what XLA's BFC allocator leaves at exit: its arena, allocated through
        # jaxlib's xla_extension.so (tsl::BFCAllocator::Extend) and never freed. Not a leak, but no verdict either.
        trace = self.path("jax_arena.db")
        shutil.copyfile(self.traces["no_leaks"], trace)
        arena = 3 << 30
        with sqlite3.connect(trace) as db:
            module = db.execute("INSERT INTO modules(path, base, size) VALUES "
                                "('/venv/site-packages/jaxlib/xla_extension.so', 0x7e0000000000, 0x1000000)").lastrowid
            db.execute("INSERT INTO symbols(pc, function, module_id) VALUES (0x7e0000000100, "
                       "'tsl::BFCAllocator::Extend', ?)", (module,))
            stack = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM stacks").fetchone()[0]
            db.execute("INSERT INTO stacks(id, depth) VALUES (?, 1)", (stack,))
            db.execute("INSERT INTO stack_frames(stack_id, level, pc) VALUES (?, 0, 0x7e0000000100)", (stack,))
            # Recorded last (highest id, latest time), like the first cudaMalloc otherwise.
            db.execute("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, "
                       "address, size, stack_id, error) SELECT (SELECT MAX(time_ns) FROM events), kind, api, source, "
                       "memory_kind, thread_id, device, stream, 0x7f7f00000000, ?, ?, 0 FROM events WHERE kind = 1 "
                       "ORDER BY id LIMIT 1",
                       (arena, stack))
        before = json.loads(self.report(self.traces["no_leaks"]).stdout)
        result = self.report(trace, "--fail-on-leak")
        self.assertEqual(result.returncode, 1, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual(report["totals"]["leaked_bytes"], before["totals"]["leaked_bytes"])
        self.assertEqual(report["totals"]["cached_at_exit_bytes"], before["totals"]["cached_at_exit_bytes"] + arena)
        self.assertEqual(report["leaks"], before["leaks"])
        self.assertFalse(report["cached_at_exit"]["verdict_complete"])
        self.assertTrue(report["cached_at_exit"]["listed_leaks_exact"])
        heap = [h for h in report["cached_at_exit"]["heaps"] if h["source"] == "xla_arena"]
        self.assertEqual([(h["reserved_bytes"], h["reserved_allocations"], h["cached"]) for h in heap],
                         [(arena, 1, True)])
        self.assertIn("whose blocks were not all recorded", result.stderr)
        self.assertIn("JAX/XLA's preallocated arena: per-buffer truth needs XLA_PYTHON_CLIENT_ALLOCATOR=platform",
                      result.stderr)
        text = run_cli("report", trace).stdout
        self.assertIn("No leaks outside JAX/XLA's preallocated arena; no verdict on JAX's buffers in it.", text)

    def test_fail_on_growth(self):
        steady = self.report(self.traces["steady_state"], "--fail-on-growth")
        self.assertEqual(steady.returncode, 0, steady.stderr)
        growing = run_cli("report", "--fail-on-growth", self.traces["slow_leak"])
        self.assertEqual(growing.returncode, 1)
        self.assertIn("Growth", growing.stdout)  # the report is still written
        self.assertRegex(growing.stderr, r"--fail-on-growth failed: 1 growth finding: device 0 grew [\d.]+ MiB at")
        # A program that leaks at exit but does not grow steadily passes the growth gate alone.
        self.assertEqual(self.report(self.traces["leaky"], "--fail-on-growth").returncode, 0)

    def test_suppressions_take_leaks_out_of_the_gate(self):
        supp = self.write("known.supp", "# known leaks\n\nleak:*load_weights*\nleak:*make_workspace*\n"
                                        "leak:*never_called*\n")
        result = self.report(self.traces["leaky"], "--suppressions", supp)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        left = 64 * KiB + 512 * KiB
        self.assertEqual(report["totals"]["leaked_bytes"], left)
        self.assertEqual(report["totals"]["leaked_allocations"], 2)
        self.assertEqual(sorted(leak["bytes"] for leak in report["leaks"]), [64 * KiB, 512 * KiB])
        self.assertEqual(report["suppressed"], [
            {"rule": "leak:*load_weights*", "origin": f"{supp}:3", "bytes": 4 * MiB, "count": 1, "groups": 1, "used": True},
            {"rule": "leak:*make_workspace*", "origin": f"{supp}:4", "bytes": 768 * KiB, "count": 3, "groups": 1,
             "used": True},
            {"rule": "leak:*never_called*", "origin": f"{supp}:5", "bytes": 0, "count": 0, "groups": 0, "used": False},
        ])
        self.assertEqual(self.report(self.traces["leaky"], "--suppressions", supp, f"--fail-on-leak={left}").returncode, 0)
        self.assertEqual(self.report(self.traces["leaky"], "--suppressions", supp,
                                     f"--fail-on-leak={left - 1}").returncode, 1)
        text = run_cli("report", "--suppressions", supp, self.traces["leaky"]).stdout
        self.assertIn("leak:*never_called*  unused: matched no leak", text)
        self.assertIn("leak:*load_weights*  4.00 MiB (4194304 B) in 1 allocation from 1 call stack", text)

    def test_repeated_suppressions_and_module_and_file_rules(self):
        by_module = self.write("module.supp", "leak-module:leak?\n")
        by_file = self.write("file.supp", "leak-file:*samples/leaky.cu\n")
        result = self.report(self.traces["leaky"], "--suppressions", by_module, "--suppressions", by_file,
                             "--fail-on-leak")
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        self.assertEqual(report["totals"]["leaked_bytes"], 0)
        self.assertEqual(report["leaks"], [])
        # The first rule (in file order) takes every leak; the second is unused.
        self.assertEqual([(s["bytes"], s["count"], s["groups"]) for s in report["suppressed"]],
                         [(LEAKY_LEAKED, 6, 4), (0, 0, 0)])

    def test_malformed_suppressions_file_is_exit_2_with_file_and_line(self):
        bad = self.write("bad.supp", "leak:fine\n# comment\nleaks:typo\n")
        result = self.report(self.traces["leaky"], "--suppressions", bad)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        self.assertIn(f"{bad}:3: 'leaks:typo' is not a suppression", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        missing = self.report(self.traces["leaky"], "--suppressions", self.path("missing.supp"))
        self.assertEqual(missing.returncode, 2)
        self.assertIn("missing.supp: cannot read the suppressions file", missing.stderr)

    def test_breakdown_by_thread_stream_and_module(self):
        report = json.loads(self.report(self.traces["leaky"]).stdout)
        breakdown = report["breakdown"]
        totals = report["totals"]
        self.assertEqual(len(breakdown["by_thread"]), 1)  # leaky allocates from its main thread only
        thread = breakdown["by_thread"][0]
        self.assertEqual(thread["thread"], report["trace"]["pid"])
        self.assertEqual(thread["allocations"], 26)
        self.assertEqual(thread["allocated_bytes"], totals["allocated_bytes"])
        self.assertEqual(thread["leaked_bytes"], LEAKY_LEAKED)
        self.assertEqual(thread["peak_bytes"], totals["peak_bytes"])
        # The created stream: one leaked cudaMallocAsync of 512 KiB and ten temporaries of 64 KiB.
        streams = {row["stream"]: row for row in breakdown["by_stream"]}
        self.assertEqual(len(streams), 2)
        created = [row for name, row in streams.items() if name != "0x0"][0]
        self.assertEqual((created["allocations"], created["allocated_bytes"], created["leaked_bytes"]),
                         (11, 512 * KiB + 10 * 64 * KiB, 512 * KiB))
        default = streams["0x0"]
        self.assertEqual(default["allocations"], 15)
        self.assertEqual(default["leaked_bytes"], LEAKY_LEAKED - 512 * KiB)
        self.assertEqual(default["peak_bytes"] + created["peak_bytes"], totals["peak_bytes"])
        # Every frame outside the CUDA runtime is in the sample itself.
        self.assertEqual([(row["module"], row["label"], row["allocations"]) for row in breakdown["by_module"]],
                         [("leaky", None, 26)])
        text = run_cli("report", self.traces["leaky"]).stdout
        self.assertIn("Breakdown (live at the peak", text)
        self.assertIn("  by stream\n    stream 0 (default)", text)
        # One thread and one module: those tables would repeat the totals, and only JSON has them.
        self.assertNotIn("  by thread\n", text)
        self.assertNotIn("  by module", text)


class DiffTest(CiTestCase):
    SAMPLES = ("regressing_base", "regressing_new", "steady_state", "slow_leak")

    def diff(self, base, new, *args):
        return run_cli("diff", "--format", "json", *args, self.traces[base], self.traces[new])

    def test_truth_of_the_two_builds(self):
        self.assertEqual(self.truths["regressing_base"][0]["leaked_bytes"], 2 * MiB + 3 * 128 * KiB + 64 * KiB)
        self.assertEqual(self.truths["regressing_new"][0]["leaked_bytes"], 2 * MiB + 4 * 128 * KiB + 256 * KiB)

    def test_diff_of_two_builds_matches_stacks_by_source_line(self):
        result = self.diff("regressing_base", "regressing_new")
        self.assertEqual(result.returncode, 0, result.stderr)  # no --fail-on-regression: just the diff
        diff = json.loads(result.stdout)
        leaks = {leak["stack"][0]["function"].split("::")[-1].split("(")[0]: leak for leak in diff["leaks"]}
        expected = {  # function: (status, base bytes, new bytes, regression)
            "load_weights": ("same", 2 * MiB, 2 * MiB, False),
            "make_workspace": ("grew", 384 * KiB, 512 * KiB, True),
            "stage_inputs": ("gone", 64 * KiB, 0, False),
            "cache_results": ("new", 0, 256 * KiB, True),
        }
        self.assertEqual(sorted(leaks), sorted(expected))
        for function, (status, base, new, regression) in expected.items():
            with self.subTest(function=function):
                leak = leaks[function]
                self.assertEqual((leak["status"], leak["base_bytes"], leak["new_bytes"], leak["regression"]),
                                 (status, base, new, regression))
                self.assertEqual(leak["delta_bytes"], new - base)
                self.assertEqual(leak["stack"][0]["line"], marker_line("regressing.cu", f"LEAK-SITE: {function}"))
        # Peak: weights, workspaces, staging (base) or cache (new), and the 1 MiB temporaries on top.
        base_peak = 2 * MiB + 384 * KiB + 64 * KiB + MiB
        new_peak = 2 * MiB + 512 * KiB + 256 * KiB + MiB
        self.assertEqual((diff["peak"]["base_bytes"], diff["peak"]["new_bytes"]), (base_peak, new_peak))
        self.assertEqual(diff["peak"]["delta_bytes"], 320 * KiB)
        self.assertEqual(diff["devices"], [{"device": 0, "base_bytes": base_peak, "new_bytes": new_peak,
                                            "delta_bytes": 320 * KiB, "regression": True}])
        self.assertEqual((diff["leaked"]["base_bytes"], diff["leaked"]["new_bytes"]),
                         (2555904, 2883584))
        self.assertTrue(diff["regression"])
        self.assertEqual(len(diff["regressions"]), 5)

    def test_fail_on_regression_exit_codes(self):
        failed = self.diff("regressing_base", "regressing_new", "--fail-on-regression")
        self.assertEqual(failed.returncode, 1)
        self.assertIn("--fail-on-regression failed: 5 regressions; first: new leak: 256.00 KiB (262144 B) in 1 allocation at", failed.stderr)
        same = self.diff("regressing_new", "regressing_new", "--fail-on-regression")
        self.assertEqual(same.returncode, 0, same.stderr)
        self.assertEqual({leak["status"] for leak in json.loads(same.stdout)["leaks"]}, {"same"})
        # Backwards, the fixed staging leak is a new leak stack.
        backwards = self.diff("regressing_new", "regressing_base", "--fail-on-regression")
        self.assertEqual(backwards.returncode, 1)
        self.assertEqual([r for r in json.loads(backwards.stdout)["regressions"] if r.startswith("new leak")],
                         [r for r in json.loads(backwards.stdout)["regressions"] if "stage_inputs" in r])

    def test_thresholds_and_suppressions(self):
        supp = self.write("cache.supp", "leak:*cache_results*\n")
        # The new cache suppressed; +128 KiB workspace, +64 KiB leaked, +320 KiB peak: all within 1 MiB.
        result = self.diff("regressing_base", "regressing_new", "--fail-on-regression", "--threshold", "1MiB",
                           "--suppressions", supp)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(json.loads(result.stdout)["threshold"], {"bytes": MiB, "percent": None})
        # 10%: the peak grew 9.3%, the workspace 33%: a regression.
        pct = self.diff("regressing_base", "regressing_new", "--fail-on-regression", "--threshold", "10%",
                        "--suppressions", supp)
        self.assertEqual(pct.returncode, 1)
        self.assertEqual([r.split(" at ")[0] for r in json.loads(pct.stdout)["regressions"]],
                         ["leak grew by +128.00 KiB (384.00 KiB -> 512.00 KiB)"])

    def test_new_growth_finding_is_a_regression(self):
        result = self.diff("steady_state", "slow_leak", "--fail-on-regression")
        self.assertEqual(result.returncode, 1)
        growth = json.loads(result.stdout)["growth"]
        self.assertEqual(len(growth["devices"]), 1)
        self.assertEqual((growth["devices"][0]["device"], growth["devices"][0]["status"],
                          growth["devices"][0]["regression"]), (0, "appeared", True))
        self.assertIsNone(growth["devices"][0]["base_rate_bytes_per_s"])
        text = run_cli("diff", self.traces["slow_leak"], self.traces["steady_state"]).stdout
        self.assertIn("disappeared", text)

    def test_bad_input_is_exit_2(self):
        missing = run_cli("diff", self.traces["regressing_base"], self.path("missing.db"))
        self.assertEqual(missing.returncode, 2)
        self.assertIn("missing.db", missing.stderr)
        not_a_trace = self.write("text.db", "not a trace\n")
        garbage = run_cli("diff", not_a_trace, self.traces["regressing_base"])
        self.assertEqual(garbage.returncode, 2)
        self.assertIn("text.db", garbage.stderr)
        threshold = run_cli("diff", "--threshold", "5x", self.traces["regressing_base"], self.traces["regressing_new"])
        self.assertEqual(threshold.returncode, 2)
        self.assertIn("--threshold", threshold.stderr)
        bad = self.write("bad.supp", "leak-modul:x\n")
        self.assertEqual(run_cli("diff", "--suppressions", bad, self.traces["regressing_base"],
                                 self.traces["regressing_new"]).returncode, 2)

    def test_help_documents_exit_codes(self):
        for command in ("diff", "report"):
            text = run_cli(command, "--help").stdout
            self.assertIn("Exit status:", text)
            self.assertIn("1 when", text)


if __name__ == "__main__":
    unittest.main()
