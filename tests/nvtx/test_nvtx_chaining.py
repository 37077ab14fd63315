"""Chaining and emission through the door Nsight Systems uses: a recording NVTX injection library
(tests/nvtx/recording_injection.cpp) set as NVTX_INJECTION64_PATH before `gpumemtrace run`. It must still receive
every NVTX call of the app while gpumemtrace records them too; with --nvtx-emit it receives gpumemtrace's own
domain, markers and ranges; and a tool that fails never costs the app its NVTX or gpumemtrace its ranges."""
import collections
import unittest

from gmt_e2e import TraceDirTestCase, report_json
from nvtx_support import (COPIES_PROGRAM, EXPECTED_LEVELS, EXPECTED_RANGES, NVTX_SAMPLE, RECORDING_LIBRARY, STEPS, WIDE,
                          parse_levels, read_marks, read_ranges, read_recording, read_strings, recorded_ranges, run_gmt,
                          run_raw)

# What the recording library must receive from samples/nvtx_ranges: (domain, message) -> pushes and starts.
APP_RANGES_RECEIVED = collections.Counter({
    ("-", "epoch"): 1, ("-", "step"): STEPS, ("sample.io", "(registered:load batch)"): STEPS, ("-", "ex range"): 1,
    ("-", WIDE): 1, ("-", "worker"): 1, ("-", "left open"): 1, ("-", "async copy"): 1, ("-", "wide start"): 1,
    ("sample.io", "prefetch"): 1, ("-", "never ended"): 1,
})
APP_MARKS_RECEIVED = collections.Counter({("-", "begin"): 1, ("sample.io", "batch loaded"): STEPS,
                                          ("-", "wide mark"): 1})
LEVEL_OFFSET = 100  # the recording library adds this to the levels it returns


def chained_env(record, **extra):
    env = {"NVTX_INJECTION64_PATH": RECORDING_LIBRARY, "GMT_TEST_NVTX_RECORD": record}
    env.update(extra)
    return env


def app_lines(lines):
    return [f for f in lines if len(f) > 1 and f[1] != "gpumemtrace"]


def own_lines(lines):
    return [f for f in lines if len(f) > 1 and f[1] == "gpumemtrace"]


class ChainingTest(TraceDirTestCase):
    """Both tools see every range; the app gets the chained tool's answers."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("chained.db")
        cls.record = cls.workdir.path("record.txt")
        cls.result = run_gmt("run", "-q", "--simulate", "-o", cls.trace, "--", NVTX_SAMPLE, "--print-levels",
                             env=chained_env(cls.record, GMT_TEST_NVTX_LEVEL_OFFSET=str(LEVEL_OFFSET)))
        cls.lines = read_recording(cls.record)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_app_runs(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)

    def test_the_chained_tool_receives_every_range_and_marker(self):
        lines = app_lines(self.lines)
        self.assertEqual(self.lines.count(("init",)), 1)  # one NVTX copy (the app's), initialized once
        self.assertEqual(recorded_ranges(lines), APP_RANGES_RECEIVED)
        marks = collections.Counter((f[1], f[2]) for f in lines if f[0] == "mark")
        self.assertEqual(marks, APP_MARKS_RECEIVED)
        pops = collections.Counter(f[1] for f in lines if f[0] == "pop")
        self.assertEqual(pops, {"-": 1 + STEPS + 2 + 1 + 1, "sample.io": STEPS})  # incl. the pop with none open
        self.assertEqual(sorted(f[1:] for f in lines if f[0] == "domain_create"), [("sample.io",)])
        self.assertEqual([f[1:] for f in lines if f[0] == "register"], [("sample.io", "load batch")])

    def test_the_chained_tool_gets_its_own_handles_and_ids_back(self):
        for fields in self.lines:
            self.assertNotIn("BAD", fields)
            self.assertNotIn("BAD_STRING", fields)
        ends = [f for f in self.lines if f[0] == "end"]
        self.assertEqual(len(ends), 3)  # async copy, wide start, prefetch ("never ended" never ends)
        self.assertTrue(all(f[3] == "known" for f in ends), ends)

    def test_the_app_gets_the_chained_tools_return_values(self):
        expected = [(what, value + LEVEL_OFFSET if value >= 0 else value) for what, value in EXPECTED_LEVELS]
        self.assertEqual(parse_levels(self.result.stdout), expected)

    def test_gpumemtrace_records_the_same_ranges(self):
        self.assertEqual(collections.Counter(r.key for r in read_ranges(self.trace)), EXPECTED_RANGES)


class ChainedCopiesTest(TraceDirTestCase):
    """Two NVTX copies and a repeated initialization, chained: the tool initializes each copy once, receives
    each range once, and gets NVTX extension modules (here the memory API) passed through."""

    def test(self):
        trace, record = self.path("copies.db"), self.path("record.txt")
        result = run_gmt("run", "-q", "--simulate", "-o", trace, "--", COPIES_PROGRAM, env=chained_env(record))
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = read_recording(record)
        self.assertEqual(lines.count(("init",)), 2)
        self.assertEqual(recorded_ranges(lines), {("-", "program outer"): 1, ("-", "library range"): 3,
                                                  ("-", "after second init"): 1})
        self.assertEqual(sum(1 for f in lines if f[0] == "pop"), 5)
        self.assertIn(("ext_init", "1"), lines)  # NVTX_EXT_MODULEID_MEM
        self.assertEqual(len(read_ranges(trace)), 5)


class EmitTest(TraceDirTestCase):
    """--nvtx-emit: the chained tool receives gpumemtrace's domain, markers and ranges; the trace does not."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("emit.db")
        cls.record = cls.workdir.path("record.txt")
        # Steps of 250 ms: the app lives long enough for periodic flushes (every 200 ms); 1 MiB peak steps.
        cls.result = run_gmt("run", "-q", "--nvtx-emit", "--nvtx-peak-step", "1048576", "--simulate", "-o", cls.trace,
                             "--", NVTX_SAMPLE, "--request-too-much", "--step-ms", "250",
                             env=chained_env(cls.record))
        cls.lines = read_recording(cls.record)
        cls.own = own_lines(cls.lines)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_app_runs_unchanged(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        raw = run_raw(NVTX_SAMPLE, "--request-too-much")
        self.assertEqual(self.result.stdout, raw.stdout)

    def test_our_domain_and_names(self):
        self.assertEqual(self.lines.count(("init",)), 2)  # the app's NVTX copy and gpumemtrace's own
        self.assertEqual(self.lines.count(("domain_create", "gpumemtrace")), 1)
        registered = [f[2] for f in self.own if f[0] == "register"]
        self.assertEqual(registered, ["start-up: create trace", "flush", "shutdown"])

    def test_failed_allocation_marker(self):
        marks = [f[2] for f in self.own if f[0] == "mark"]
        self.assertEqual(marks.count("allocation failed: 1125899906842624 B, cudaErrorMemoryAllocation (2)"), 1)

    def test_peak_step_markers(self):
        # Live bytes peak at 2 MiB: the 1 MiB leaked in step 2 plus step 3's 1 MiB batch.
        marks = [f[2] for f in self.own if f[0] == "mark" and f[2].startswith("live bytes")]
        self.assertEqual(marks, ["live bytes passed 1.00 MiB (1048576 B)", "live bytes passed 2.00 MiB (2097152 B)"])

    def test_live_bytes_counter(self):
        # One counter (every allocation of the sample is on device 0), registered once with the int64 type.
        registered = [f[2:] for f in self.own if f[0] == "counter_register"]
        self.assertEqual(registered, [("live bytes (device 0)", "17")])  # NVTX_PAYLOAD_ENTRY_TYPE_INT64
        values = [int(f[3]) for f in self.own if f[0] == "counter" and f[2] == "live bytes (device 0)"]
        self.assertGreaterEqual(len(values), 2, values)  # flushes during the run, and the one at exit
        self.assertEqual(sum(1 for f in self.own if f[0] == "counter"), len(values))  # no UNKNOWN counter
        # Sampled only when the value changed; never above the analyzer's peak; the last one is what the
        # analyzer finds live at the end.
        self.assertTrue(all(a != b for a, b in zip(values, values[1:])), values)
        report = report_json(self.trace)
        self.assertLessEqual(max(values), report["totals"]["peak_bytes"])
        self.assertEqual(values[-1], report["totals"]["leaked_bytes"])
        self.assertGreater(values[-1], 0)

    def test_our_ranges(self):
        pushes = [f[2] for f in self.own if f[0] == "push"]
        self.assertEqual(pushes[0], "(registered:start-up: create trace)")
        self.assertEqual(pushes[-1], "(registered:shutdown)")
        flushes = [f for f in self.own if f[0] == "push" and f[2] == "(registered:flush)"]
        self.assertGreaterEqual(len(flushes), 1)
        self.assertTrue(all(int(f[3]) > 0 for f in flushes), flushes)  # payload: the events written
        self.assertEqual(pushes.count("(registered:shutdown)"), 1)
        self.assertEqual(len(pushes), sum(1 for f in self.own if f[0] == "pop"))  # balanced

    def test_the_app_is_still_chained(self):
        expected = APP_RANGES_RECEIVED.copy()
        self.assertEqual(recorded_ranges(app_lines(self.lines)), expected)

    def test_our_own_annotations_are_not_the_apps(self):
        self.assertEqual(collections.Counter(r.key for r in read_ranges(self.trace)), EXPECTED_RANGES)
        strings = read_strings(self.trace)
        for ours in ("gpumemtrace", "flush", "shutdown", "start-up: create trace"):
            self.assertNotIn(ours, strings)
        self.assertFalse(any(s.startswith(("allocation failed", "live bytes")) for s in strings))


class EmitWithoutCaptureTest(TraceDirTestCase):
    """--no-nvtx-capture under another tool: the app's NVTX goes to that tool alone; our emission still reaches it.
    Our NVTX copy then starts with the trace (in the writer thread), so the app runs long enough for that."""

    def test(self):
        trace, record = self.path("t.db"), self.path("record.txt")
        result = run_gmt("run", "-q", "--no-nvtx-capture", "--nvtx-emit", "--simulate", "-o", trace, "--", NVTX_SAMPLE,
                         "--request-too-much", "--step-ms", "250", env=chained_env(record))
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = read_recording(record)
        self.assertEqual(recorded_ranges(app_lines(lines)), APP_RANGES_RECEIVED)
        self.assertEqual(read_ranges(trace), [])
        marks = [f[2] for f in own_lines(lines) if f[0] == "mark"]
        self.assertIn("allocation failed: 1125899906842624 B, cudaErrorMemoryAllocation (2)", marks)


class BrokenToolTest(TraceDirTestCase):
    """A chained tool that refuses to start, or cannot be loaded: the app runs, gpumemtrace still has its ranges."""

    def check(self, env, expected_warning):
        trace = self.path("t.db")
        result = run_gmt("run", "--simulate", "-o", trace, "--", NVTX_SAMPLE, "--print-levels", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(expected_warning, result.stderr)
        self.assertEqual(parse_levels(result.stdout), EXPECTED_LEVELS)
        self.assertEqual(collections.Counter(r.key for r in read_ranges(trace)), EXPECTED_RANGES)
        self.assertEqual(sum(read_marks(trace).values()), 6)

    def test_refusing_tool(self):
        record = self.path("record.txt")
        self.check(chained_env(record, GMT_TEST_NVTX_REFUSE="1"), "the chained NVTX tool refused to initialize")
        self.assertEqual(read_recording(record), [("refused",)])

    def test_missing_tool(self):
        self.check({"NVTX_INJECTION64_PATH": self.path("no-such-tool.so")}, "cannot load the NVTX tool to chain to")


class EmitWithoutToolTest(TraceDirTestCase):
    def test_says_nobody_listens_and_runs(self):
        result = run_gmt("run", "--nvtx-emit", "--simulate", "-o", self.path("t.db"), "--", NVTX_SAMPLE)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("--nvtx-emit: no NVTX tool", result.stderr)
        self.assertEqual(collections.Counter(r.key for r in read_ranges(self.path("t.db"))), EXPECTED_RANGES)


if __name__ == "__main__":
    unittest.main()
