"""Reports that lead with the answer (analysis/model/findings.h, analysis/model/stack_view.h), under the simulated runtime: the
findings block names each leak site of samples/leaky.cu by function and line before anything else, with the
source line's text; no process or thread start frame appears anywhere in the text; a growing program has its
growth among the findings; README's example is what the tool prints for the demo."""
import os
import re
import unittest

from gmt_e2e import SOURCE, TraceDirTestCase, marker_line, report_json, run_cli, sample

START_FRAMES = ("_start ", "__libc_start_main", "__libc_start_call_main", "start_thread", "clone3")


class LeakyFindingsTest(TraceDirTestCase):
    def setUp(self):
        super().setUp()
        self.trace = self.path("leaky.db")
        result = run_cli("run", "--simulate", "-q", "-o", self.trace, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)

    def findings_block(self, text):
        block = text.split("\nFindings, largest first\n", 1)[1]
        return block.split("\n\n", 1)[0]

    def test_the_findings_come_first_and_name_every_leak_site_at_its_line(self):
        text = run_cli("report", self.trace).stdout
        self.assertLess(text.index("Findings, largest first"), text.index("Totals"))
        block = self.findings_block(text)
        for site in ("load_weights", "make_workspace", "stage_host_buffer", "async_scratch"):
            line = marker_line("leaky.cu", f"LEAK-SITE: {site}")
            self.assertRegex(block, rf"at .*{site}.* (\S*)samples/leaky.cu:{line} \[leaky\]")
        # The source line's text follows the frame when the file it names is readable here: the debug info
        # names it by absolute path (a compiler cache that rewrites paths makes them relative to the build).
        source_path = re.search(r" (\S*samples/leaky.cu):", block).group(1)
        text_line = "| SAMPLE_CHECK(cudaMalloc(&weights, bytes));  // LEAK-SITE: load_weights"
        if os.path.isabs(source_path):
            self.assertIn(text_line, block)
        else:
            self.assertNotIn(text_line, block)
        self.assertIn("via cudaMalloc", block)
        # The failed request is a finding too, and the largest (1 PiB).
        self.assertRegex(block.splitlines()[0], r"1\. failed allocation of 1\.00 PiB on device 0: ")

    def test_json_findings_match_the_leak_groups_to_the_byte(self):
        report = report_json(self.trace)
        leaks = [f for f in report["findings"] if f["kind"] == "leak"]
        self.assertEqual(sorted(f["bytes"] for f in leaks), sorted(g["bytes"] for g in report["leaks"]))
        self.assertEqual(sum(f["bytes"] for f in leaks), report["totals"]["leaked_bytes"])
        by_bytes = [f["bytes"] for f in report["findings"]]
        self.assertEqual(by_bytes, sorted(by_bytes, reverse=True))
        for leak in report["leaks"]:
            self.assertTrue(leak["user_frame"].startswith(leak["stack"][0]["function"]), leak["user_frame"])
            self.assertFalse(any(s in line for line in leak["stack_view"] for s in START_FRAMES), leak["stack_view"])

    def test_no_start_frame_in_any_text_stack(self):
        for args in ((), ("--full-stacks",), ("--format", "folded")):
            text = run_cli("report", *args, self.trace).stdout
            for start in START_FRAMES:
                self.assertNotIn(start, text, args)
        # JSON keeps every frame as recorded.
        report = report_json(self.trace)
        functions = [frame["function"] for leak in report["leaks"] for frame in leak["stack"]]
        self.assertTrue(any(f and f.startswith("__libc_start") for f in functions), functions)


class GrowthFindingTest(TraceDirTestCase):
    def test_a_growing_program_has_its_growth_among_the_findings(self):
        trace = self.path("slow_leak.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("slow_leak"))
        self.assertEqual(result.returncode, 0, result.stderr)
        # run's summary: everything was freed at exit, and yet the memory grew: both said.
        summary = result.stderr[result.stderr.index("gpumemtrace: trace "):]
        self.assertIn("  no leaks: every allocation was freed\n  findings, largest first:\n"
                      "    1. steady growth on device 0: +", summary)
        line = marker_line("slow_leak.cu", "LEAK-SITE: cache_result")
        self.assertRegex(summary, rf"       at .*cache_result.* \S*samples/slow_leak.cu:{line} \[slow_leak\]\n")
        report = report_json(trace)
        growth = [f for f in report["findings"] if f["kind"] == "growth"]
        self.assertEqual(len(growth), 1, report["findings"])
        self.assertRegex(growth[0]["verdict"], r"^steady growth on device 0: \+")
        self.assertIn("slow_leak.cu", growth[0]["user_frame"])
        self.assertRegex(growth[0]["detail"], r"the low watermark rose in \d+ of \d+ windows")


class ReadmeExampleTest(TraceDirTestCase):
    """README's "Example" block is the demo's real output, up to times (which vary) and the lines it elides."""

    @staticmethod
    def normalize(line):
        line = re.sub(r"\d+(\.\d+)? (ns|us|ms|s)\b", "<time>", line)
        line = re.sub(r"\d+(\.\d+)?[kM]? per second", "<rate> per second", line)
        line = re.sub(r"\S*/samples/", "samples/", line)  # where the sources were built, which varies
        return line.rstrip()

    def test_the_readme_example_is_the_real_output(self):
        with open(os.path.join(SOURCE, "README.md")) as f:
            readme = f.read()
        example = readme.split("## Example\n", 1)[1].split("```\n", 2)[1]
        trace = self.path("demo.db")
        ran = run_cli("run", "--simulate", "-o", trace, "--", sample("leaky"))
        reported = run_cli("report", trace)
        actual = {
            "run": [self.normalize(l) for l in (ran.stdout + ran.stderr).splitlines()],
            "report": [self.normalize(l) for l in reported.stdout.splitlines()],
        }
        command = None
        position = 0
        for line in example.splitlines():
            if line.startswith("$ gpumemtrace "):
                command = line.split()[2]
                position = 0
                continue
            if line == "..." or not line.strip():
                continue
            wanted = self.normalize(line.replace("demo.db", trace))
            lines = actual[command]
            self.assertIn(wanted, lines[position:], f"README line not in the output of {command} (in order):\n"
                                                    f"{line}\n--- actual:\n" + "\n".join(lines))
            position = lines.index(wanted, position) + 1


if __name__ == "__main__":
    unittest.main()
