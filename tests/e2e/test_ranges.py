"""Memory by NVTX range, growth per repetition and the report's filters, end to end under the simulated
runtime: the range_steps sample (a slow leak inside a repeated range, a steady state inside another), the
nvtx_ranges sample (every kind of NVTX range), and each filter, including each "matches nothing" line."""
import re
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, report_json, run_cli, sample

MiB = 1 << 20


def by_name(report, name, domain=None):
    for entry in report["ranges"]["by_name"]:
        if entry["name"] == name and entry["domain"] == domain and not entry["none"]:
            return entry
    raise AssertionError(f"no range {name!r} in {[e['name'] for e in report['ranges']['by_name']]}")


def none_bucket(report):
    last = report["ranges"]["by_name"][-1]
    assert last["none"], last
    return last


class RangeTestCase(TraceDirTestCase):
    def profile(self, name, *args):
        trace = self.path(f"{name}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample(name), *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return trace, result.stdout

    def steps_trace(self):
        trace, stdout = self.profile("range_steps")
        steps = int(re.search(r"truth: range_steps steps=(\d+)", stdout).group(1))
        return trace, steps


class RangeStepsTest(RangeTestCase):
    def test_memory_per_range(self):
        trace, steps = self.steps_trace()
        report = report_json(trace)
        self.assertTrue(report["ranges"]["available"])
        self.assertEqual(report["ranges"]["range_count"], 3 * steps)
        self.assertEqual(report["totals"]["leaked_bytes"], 0)

        leaky = by_name(report, "leaky step")
        self.assertEqual((leaky["repetitions"], leaky["allocations"], leaky["allocated_bytes"]), (steps, steps, steps * MiB))
        # The cache is freed at shutdown, outside every range: still frees of what the range allocated.
        self.assertEqual((leaky["frees"], leaky["freed_bytes"], leaky["live_bytes"]), (steps, steps * MiB, 0))
        forward = by_name(report, "forward")
        inputs = sum((2 + s % 3) * MiB for s in range(steps))
        self.assertEqual((forward["repetitions"], forward["allocations"], forward["allocated_bytes"]), (steps, steps, inputs))
        self.assertEqual((forward["frees"], forward["freed_bytes"]), (steps, inputs))
        steady = by_name(report, "steady step")
        self.assertEqual((steady["allocations"], steady["allocated_bytes"]), (2 * steps, 4 * MiB * steps))
        self.assertEqual((steady["frees"], steady["live_allocations"]), (2 * steps, 0))  # the last output is freed outside, still a free of the range's allocation
        none = none_bucket(report)
        self.assertEqual((none["allocations"], none["allocated_bytes"], none["frees"]), (1, 8 * MiB, 1))
        # Peaks while inside: weights 8 MiB, the cache so far, the step's own allocations.
        self.assertEqual(leaky["peak_live_bytes"], max((8 + s + 1 + 2 + s % 3) * MiB for s in range(steps)))
        self.assertEqual(forward["peak_live_bytes"], max((8 + s + 2 + s % 3) * MiB for s in range(steps)))
        self.assertEqual(steady["peak_live_bytes"], (8 + steps + 3 + 3) * MiB)

    def test_slow_leak_in_a_repeated_range_is_found_and_the_steady_state_is_not(self):
        trace, steps = self.steps_trace()
        report = report_json(trace)
        growth = report["ranges"]["growth"]
        self.assertEqual([g["name"] for g in growth], ["leaky step"])
        finding = growth[0]
        self.assertEqual(finding["iterations"], steps)
        self.assertAlmostEqual(finding["bytes_per_iteration"], MiB, delta=1)
        self.assertEqual(finding["live_bytes_at_end"], [(s + 1) * MiB for s in range(steps)])
        top = finding["stacks"][0]
        self.assertEqual(top["growth_bytes"], (steps - 2) * MiB)
        frame = top["stack"][0]
        self.assertIn("cache_step_result", frame["function"])
        self.assertEqual(frame["line"], marker_line("range_steps.cu", "LEAK-SITE: cache_step_result"))
        self.assertEqual(finding["growing_stack_groups"], 1)
        repeated = {g["name"]: g for g in report["ranges"]["repeated"]}
        self.assertEqual(sorted(repeated), ["forward", "leaky step", "steady step"])
        self.assertFalse(repeated["steady step"]["growing"])
        self.assertEqual(repeated["steady step"]["live_bytes_at_end"], [3 * MiB] * steps)
        self.assertFalse(repeated["forward"]["growing"])

        text = run_cli("report", trace).stdout
        self.assertIn("Memory by NVTX range", text)
        self.assertIn(f"'leaky step' grows by 1.00 MiB per repetition over {steps} repetitions", text)
        self.assertIn(f"'steady step': no steady growth over {steps} repetitions", text)

    def test_range_spans(self):
        trace, steps = self.steps_trace()
        report = report_json(trace)
        spans = report["range_spans"]
        self.assertEqual(report["range_spans_left_out"], 0)
        self.assertEqual(len(spans), 3 * steps)
        # Outermost first: the two loops' steps (depth 0) in time order, then "forward" (depth 1).
        self.assertEqual([s["depth"] for s in spans], [0] * (2 * steps) + [1] * steps)
        self.assertEqual([s["name"] for s in spans[:2 * steps]], ["leaky step"] * steps + ["steady step"] * steps)
        for span in spans:
            self.assertIsNotNone(span["end_ns"])
            self.assertLessEqual(0, span["start_ns"])
            self.assertLessEqual(span["start_ns"], span["end_ns"])
            self.assertIsNone(span["domain"])


class NvtxRangesSampleTest(RangeTestCase):
    def test_every_kind_of_range(self):
        trace, _ = self.profile("nvtx_ranges")
        report = report_json(trace)
        load = by_name(report, "load batch", "sample.io")
        self.assertEqual((load["repetitions"], load["allocations"], load["allocated_bytes"]), (4, 4, 4 * MiB))
        self.assertEqual((load["frees"], load["live_allocations"], load["live_bytes"]), (3, 1, MiB))
        # The innermost range of the step is "load batch" (another domain, same thread): "step" has none.
        self.assertEqual(by_name(report, "step")["allocations"], 0)
        self.assertEqual(by_name(report, "step")["repetitions"], 4)
        # A start/end range started by the thread after its push/pop "epoch" is the innermost.
        copy = by_name(report, "async copy")
        self.assertEqual((copy["allocations"], copy["allocated_bytes"], copy["frees"]), (1, 4096, 1))
        self.assertEqual(by_name(report, "epoch")["allocations"], 0)
        self.assertEqual(none_bucket(report)["allocations"], 0)
        self.assertEqual(by_name(report, "never ended")["repetitions"], 1)
        spans = {s["name"]: s for s in report["range_spans"]}
        self.assertIsNone(spans["never ended"]["end_ns"])
        self.assertIsNone(spans["left open"]["end_ns"])
        self.assertEqual(spans["prefetch"]["domain"], "sample.io")
        self.assertEqual(spans["never ended"]["depth"], -1)
        self.assertNotEqual(spans["worker"]["thread_id"], spans["epoch"]["thread_id"])
        # One leak (step 2's batch) is not steady growth.
        self.assertEqual(report["ranges"]["growth"], [])


class FilterTest(RangeTestCase):
    def report(self, trace, *options):
        result = run_cli("report", "--format", "json", *options, trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        import json
        return json.loads(result.stdout), result.stderr

    def test_filters_select_allocations(self):
        trace, steps = self.steps_trace()
        in_leaky, _ = self.report(trace, "--range", "leaky step")
        self.assertEqual(in_leaky["totals"]["allocations"], 2 * steps)  # the cache entries and the inputs of "forward"
        self.assertEqual(in_leaky["filters"]["range"], "leaky step")
        self.assertEqual(in_leaky["filters"]["allocations_matched"], 2 * steps)
        self.assertEqual(in_leaky["filters"]["allocations_seen"], 1 + 2 * steps + 2 * steps)
        self.assertIsNone(in_leaky["filters"]["nothing_matched"])
        big, _ = self.report(trace, "--min-size", "4MiB")
        self.assertEqual(big["totals"]["allocations"], 1 + sum(1 for s in range(steps) if 2 + s % 3 >= 4))
        self.assertEqual(big["filters"]["min_size"], 4 * MiB)
        device0, _ = self.report(trace, "--device", "0")
        self.assertEqual(device0["totals"]["allocations"], 1 + 4 * steps)
        pid = report_json(trace)["trace"]["pid"]
        same_pid, _ = self.report(trace, "--pid", str(pid))
        self.assertEqual(same_pid["totals"]["allocations"], 1 + 4 * steps)
        everything, _ = self.report(trace, "--since", "0", "--until", "100000")
        self.assertEqual(everything["totals"]["allocations"], 1 + 4 * steps)
        self.assertEqual(everything["filters"]["until_ns"], 100000 * 10**9)
        text = run_cli("report", "--device", "0", "--min-size", "1MiB", trace).stdout
        self.assertIn(f"filters    --device 0 --min-size 1048576 ({1 + 4 * steps} of {1 + 4 * steps} allocations analyzed)", text)

    def test_each_filter_that_matches_nothing_says_so(self):
        trace, _ = self.steps_trace()
        pid = report_json(trace)["trace"]["pid"]
        cases = [
            (["--device", "3"], "--device 3 matches nothing: the trace allocates on device(s) 0 only"),
            (["--since", "100000"], "--since 100000 matches nothing: no allocation in that time window"),
            (["--pid", str(pid + 1)], f"--pid {pid + 1} matches nothing: the trace is of process {pid}"),
            (["--min-size", "1GiB"], "--min-size 1073741824 matches nothing: the largest allocation is 8.00 MiB"),
            (["--range", "no such range"], "--range 'no such range' matches nothing: the trace has no NVTX range of that name"),
        ]
        for options, line in cases:
            with self.subTest(options=options):
                report, stderr = self.report(trace, *options)
                self.assertEqual(report["totals"]["allocations"], 0)
                self.assertIn(line, report["filters"]["nothing_matched"])
                self.assertEqual(len([l for l in stderr.splitlines() if "matches nothing" in l]), 1, stderr)
                self.assertIn("gpumemtrace: " + line, stderr)
                text = run_cli("report", *options, trace)
                self.assertEqual(text.returncode, 0)
                self.assertIn("note: " + line, text.stdout)

    def test_range_on_a_trace_without_ranges(self):
        trace, _ = self.profile("leaky")
        report = report_json(trace)
        self.assertEqual(report["ranges"]["by_name"], [])
        self.assertEqual(report["range_spans"], [])
        self.assertGreater(report["totals"]["leaked_bytes"], 0)  # everything else is still reported
        self.assertIn("the trace has no NVTX ranges", run_cli("report", trace).stdout)
        filtered, stderr = self.report(trace, "--range", "step")
        self.assertEqual(filtered["filters"]["nothing_matched"], "--range 'step' matches nothing: the trace has no NVTX ranges")
        self.assertIn("the trace has no NVTX ranges", stderr)

    def test_malformed_values_exit_2(self):
        trace, _ = self.steps_trace()
        cases = [
            (["--since", "abc"], "--since 'abc' is not a time"),
            (["--until", "-1"], "--until '-1' is not a time"),
            (["--since", "2", "--until", "1"], "--until 1 is before --since 2"),
            (["--device", "zero"], "--device"),
            (["--min-size", "12XB"], "--min-size"),
            (["--pid", "0"], "--pid"),
        ]
        for options, message in cases:
            with self.subTest(options=options):
                result = run_cli("report", *options, trace)
                self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertEqual(result.stdout, "")


if __name__ == "__main__":
    unittest.main()
