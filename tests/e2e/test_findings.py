"""Findings over time under the simulated runtime: no growth for a steady state, growth with its call stack
and projection for a slow leak, the fragmentation ratio of a fragmenting program, and the OOM labels
("fragmentation" with memory to spare, "out of memory" without) of a small fragmented device."""
import re
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, parse_truth, report_json, run_cli, sample

MiB = 1 << 20


def parse_fields(stdout, tag):
    """The numbers of a 'truth: TAG a=1 b=2' (or 'truth: TAG=1 b=2') line as a dict."""
    for line in stdout.splitlines():
        if line.startswith(f"truth: {tag} ") or line.startswith(f"truth: {tag}="):
            return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", line)}
    raise AssertionError(f"no 'truth: {tag}' line in: {stdout}")


class FindingsTestCase(TraceDirTestCase):
    def profile(self, name, *args, env=None):
        trace = self.path(f"{name}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample(name), *args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return trace, result.stdout


class SteadyStateTest(FindingsTestCase):
    def test_no_growth_finding(self):
        trace, stdout = self.profile("steady_state")
        report = report_json(trace)
        growth = report["growth"]
        self.assertTrue(growth["analyzed"], growth["reason"])
        self.assertEqual(growth["findings"], [])
        self.assertEqual(len(growth["devices"]), 1)
        self.assertFalse(growth["devices"][0]["growing"])
        self.assertEqual(report["totals"]["leaked_bytes"], parse_truth(stdout)[0]["leaked_bytes"])
        # The weights (64 MiB) are the floor of the windows after the warm-up (a window that falls inside
        # one slow step, when the machine is busy, may sit higher).
        self.assertEqual(min(growth["devices"][0]["low_watermarks"][1:]), 64 * MiB)
        self.assertLess(growth["devices"][0]["rising_steps"] * 2, growth["devices"][0]["steps"])
        text = run_cli("report", trace).stdout
        self.assertIn("no steady growth", text)


class SlowLeakTest(FindingsTestCase):
    def check_finding(self, report, stdout):
        per_iteration = parse_fields(stdout, "growth_bytes_per_iteration")["growth_bytes_per_iteration"]
        # The cache is freed at shutdown: nothing leaks at exit, the growth is the only finding.
        self.assertEqual(report["totals"]["leaked_bytes"], 0)
        growth = report["growth"]
        self.assertTrue(growth["analyzed"], growth["reason"])
        self.assertEqual(len(growth["findings"]), 1)
        finding = growth["findings"][0]
        self.assertEqual(finding["device"], 0)
        self.assertGreater(finding["rate_bytes_per_s"], 0)
        rise = finding["end_low_bytes"] - finding["start_low_bytes"]
        self.assertGreater(rise, 0)
        self.assertEqual(rise % per_iteration, 0)  # at the low watermarks only whole cache entries differ
        top = finding["stacks"][0]
        self.assertEqual(top["growth_bytes"], rise)
        frame = top["stack"][0]
        self.assertIn("cache_result", frame["function"])
        self.assertTrue(frame["file"].endswith("samples/slow_leak.cu"), frame)
        self.assertEqual(frame["line"], marker_line("slow_leak.cu", "LEAK-SITE: cache_result"))
        self.assertIn("main", [f["function"] for f in top["stack"]])
        # Nothing else grows: the model and the temporaries are back at their level at every low watermark.
        self.assertEqual(finding["growing_stack_groups"], 1)
        return finding

    def test_growth_is_found_without_a_projection_when_the_capacity_is_unknown(self):
        trace, stdout = self.profile("slow_leak", env={"GMT_SIM_DEVICE_BYTES": "1G"})
        finding = self.check_finding(report_json(trace), stdout)
        self.assertIsNone(finding["projection"])

    def test_projection_when_the_capacity_is_known(self):
        trace, stdout = self.profile("slow_leak", "--probe-capacity", env={"GMT_SIM_DEVICE_BYTES": "1G"})
        report = report_json(trace)
        finding = self.check_finding(report, stdout)
        projection = finding["projection"]
        self.assertIsNotNone(projection)
        self.assertEqual(projection["device_total_bytes"], 1 << 30)
        expected = ((1 << 30) - finding["end_low_bytes"]) / finding["rate_bytes_per_s"]
        self.assertAlmostEqual(projection["seconds_until_full"], expected, delta=expected * 1e-9)
        self.assertEqual(report["failures"][0]["label"], "out of memory")  # the 1 PiB probe
        text = run_cli("report", trace).stdout
        # A run of a few seconds: growth in bytes, no rate per second or projection in the text (JSON has both).
        span = finding["end_time_ns"] - finding["start_time_ns"]
        if span < 10_000_000_000:
            self.assertIn("device 0 grew steadily by", text)
            self.assertNotIn("at this rate", text)
        else:
            self.assertIn("device 0 grows steadily at", text)
            self.assertIn("at this rate device 0 is full in", text)
        self.assertIn("slow_leak.cu:%d" % marker_line("slow_leak.cu", "LEAK-SITE: cache_result"), text)


class FragmentingTest(FindingsTestCase):
    def test_fragmentation_at_the_end_equals_the_programs_own_count(self):
        trace, stdout = self.profile("fragmenting")
        truth = parse_fields(stdout, "fragmentation")
        report = report_json(trace)
        self.assertEqual(report["totals"]["leaked_bytes"], parse_truth(stdout)[0]["leaked_bytes"])
        self.assertEqual(len(report["fragmentation"]), 1)
        device = report["fragmentation"][0]
        at_end = device["at_end"]
        self.assertEqual(at_end["allocations"], truth["allocations"])
        self.assertEqual(at_end["free_bytes"], truth["free_bytes"])
        self.assertEqual(at_end["largest_gap_bytes"], truth["largest_gap_bytes"])
        self.assertAlmostEqual(at_end["ratio"], 1 - truth["largest_gap_bytes"] / truth["free_bytes"])
        self.assertGreater(at_end["ratio"], 0.5)
        # Under the simulated first-fit heap: gaps of 2, 4, 6, 8, 10, 2, 4, 6, 8 MiB (the last freed block
        # is above the highest live one, outside the span).
        self.assertEqual((at_end["free_bytes"], at_end["largest_gap_bytes"]), (50 * MiB, 10 * MiB))
        # At the peak every block was live, side by side: nothing free between them.
        self.assertEqual(device["at_peak"]["free_bytes"], 0)
        self.assertEqual(device["at_peak"]["allocations"], 20)


class OomFragmentedTest(FindingsTestCase):
    def test_failures_are_labelled_fragmentation_and_out_of_memory(self):
        trace, stdout = self.profile("oom_fragmented", env={"GMT_SIM_DEVICE_BYTES": "64M"})
        truth = parse_fields(stdout, "oom")
        self.assertEqual(truth["block_bytes"], 4 * MiB)
        report = report_json(trace)
        failures = report["failures"]
        self.assertEqual(len(failures), parse_truth(stdout)[0]["failed_allocations"])
        self.assertEqual(len(failures), 2)
        line = marker_line("oom_fragmented.cu", "FAILED-SITE: request")

        fragmented = failures[0]
        self.assertEqual(fragmented["requested_bytes"], truth["fragmented_request"])
        self.assertEqual(fragmented["device_free"], truth["device_free"])
        self.assertGreater(fragmented["device_free"], fragmented["requested_bytes"])
        self.assertEqual(fragmented["device_total"], 64 * MiB)
        self.assertEqual(fragmented["label"], "fragmentation")
        self.assertEqual(fragmented["largest_free_gap"], truth["block_bytes"])
        self.assertLess(fragmented["largest_free_gap"], fragmented["requested_bytes"])
        # Seven free blocks between the eight live ones (the eighth free block is above the span).
        self.assertEqual(fragmented["fragmentation"]["free_bytes"], 7 * truth["block_bytes"])
        self.assertEqual(fragmented["stack"][0]["line"], line)
        holder = fragmented["top_stacks"][0]
        self.assertIn("fill_device", holder["stack"][0]["function"])
        self.assertEqual((holder["bytes"], holder["count"]), (8 * truth["block_bytes"], 8))

        oom = failures[1]
        self.assertEqual(oom["requested_bytes"], truth["true_oom_request"])
        self.assertLess(oom["device_free"], oom["requested_bytes"])
        self.assertEqual(oom["label"], "out of memory")

        text = run_cli("report", trace).stdout
        self.assertIn("label: fragmentation", text)
        self.assertIn("label: out of memory", text)
        # An address gap between driver allocations does not say whether a cudaMalloc fits: JSON only.
        self.assertNotIn("largest free gap", text)
        self.assertNotIn("Fragmentation of device memory", text)


if __name__ == "__main__":
    unittest.main()
