"""`report --format perfetto` checked against the Chrome trace-event format (JSON Object Format): the fields
each phase requires, numeric times in microseconds, and counter values equal to the JSON report's timeline,
failures and growth findings; single allocations as async slices (every one closed, ids unique) whose count and
bytes, with the summed remainder that otherData states, are the trace's."""
import json
import numbers
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from torch_shaped_trace import A, B, F, MIB, make_torch_shaped_trace

# Fields every event of a phase must carry (Trace Event Format: "ph", "name", "pid", "tid"; "ts" for all
# but metadata; "dur" for complete events; "s" (scope) for instant events; args for counters and metadata).
REQUIRED = {
    "M": {"name", "pid", "tid", "args"},
    "C": {"name", "pid", "tid", "ts", "args"},
    "i": {"name", "pid", "tid", "ts", "s"},
    "X": {"name", "pid", "tid", "ts", "dur"},
    "b": {"name", "pid", "tid", "ts", "id", "cat"},
    "e": {"name", "pid", "tid", "ts", "id", "cat"},
}


class PerfettoTest(TraceDirTestCase):
    def export(self, name, *args, env=None, report_args=()):
        trace = self.path(f"{name}.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample(name), *args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return self.export_trace(trace, report_args)

    def export_trace(self, trace, report_args=()):
        out = trace + ".json"
        result = run_cli("report", "--format", "perfetto", "-o", out, *report_args, trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            document = json.load(f)
        self.check_format(document)
        return document, report_json(trace)

    def check_format(self, document):
        self.assertIsInstance(document["traceEvents"], list)
        self.assertIn(document["displayTimeUnit"], ("ms", "ns"))
        for event in document["traceEvents"]:
            phase = event["ph"]
            self.assertIn(phase, REQUIRED, event)
            missing = REQUIRED[phase] - set(event)
            self.assertFalse(missing, f"{event} lacks {missing}")
            self.assertIsInstance(event["name"], str)
            self.assertIsInstance(event["pid"], int)
            self.assertIsInstance(event["tid"], int)
            if phase != "M":
                self.assertIsInstance(event["ts"], numbers.Real)
                self.assertNotIsInstance(event["ts"], bool)
                self.assertGreaterEqual(event["ts"], 0)
            if phase == "C":
                self.assertTrue(event["args"])
                for value in event["args"].values():  # counters plot numbers only
                    self.assertIsInstance(value, numbers.Real)
            if phase == "i":
                self.assertIn(event["s"], ("g", "p", "t"))
            if phase == "X":
                self.assertIsInstance(event["dur"], numbers.Real)
                self.assertGreaterEqual(event["dur"], 0)
            if phase == "M":
                self.assertIn(event["name"], ("process_name", "thread_name", "process_sort_index", "thread_sort_index"))

    def counter_track(self, document, pid, name):
        events = [e for e in document["traceEvents"] if e["ph"] == "C" and e["pid"] == pid and e["name"] == name]
        return [(e["ts"], e["args"]["bytes"]) for e in events]

    def process_ids(self, document):
        return {e["args"]["name"]: e["pid"] for e in document["traceEvents"] if e["name"] == "process_name"}

    def check_timeline(self, document, report):
        timeline = report["timeline"]
        self.assertGreater(len(timeline["total"]), 0)
        pids = self.process_ids(document)
        app = [pid for name, pid in pids.items() if name.startswith("gpumemtrace: ")]
        self.assertEqual(len(app), 1)
        for suffix, field in ((" (max)", "max_bytes"), (" (min)", "min_bytes")):
            expected = [(b["start_ns"] / 1000, b[field]) for b in timeline["total"]]
            self.assertEqual(self.counter_track(document, app[0], "live bytes, all devices" + suffix), expected)
            for series in timeline["series"]:
                device = f"device {series['device']}" if series["device"] >= 0 else "host memory"
                name = f"{series['memory_kind']} live bytes{suffix}"
                with self.subTest(device=device, track=name):
                    expected = [(b["start_ns"] / 1000, b[field]) for b in series["buckets"]]
                    self.assertEqual(self.counter_track(document, pids[device], name), expected)

    def test_leaky_counters_equal_the_json_timeline(self):
        document, report = self.export("leaky")
        self.check_timeline(document, report)
        peaks = [e for e in document["traceEvents"] if e["ph"] == "i" and e.get("cat") == "peak"]
        self.assertEqual(sorted(e["args"]["bytes"] for e in peaks), sorted(p["bytes"] for p in report["peak_stacks"]))

    def test_failed_allocations_are_instants(self):
        document, report = self.export("oom_fragmented", env={"GMT_SIM_DEVICE_BYTES": "64M"})
        self.check_timeline(document, report)
        failures = [e for e in document["traceEvents"] if e["ph"] == "i" and e.get("cat") == "failure"]
        self.assertEqual(len(report["failures"]), 2)
        self.assertEqual([(e["ts"], e["args"]["requested_bytes"], e["args"]["label"]) for e in failures],
                         [(f["time_ns"] / 1000, f["requested_bytes"], f["label"]) for f in report["failures"]])

    def test_growth_findings_are_instants(self):
        document, report = self.export("slow_leak", env={"GMT_SIM_DEVICE_BYTES": "1G"})
        self.check_timeline(document, report)
        growth = [e for e in document["traceEvents"] if e["ph"] == "i" and e.get("cat") == "growth"]
        findings = report["growth"]["findings"]
        self.assertEqual(len(findings), 1)
        self.assertEqual([(e["ts"], e["args"]["end_low_bytes"], e["args"]["start_low_bytes"]) for e in growth],
                         [(f["end_time_ns"] / 1000, f["end_low_bytes"], f["start_low_bytes"]) for f in findings])

    def test_nvtx_ranges_are_slices(self):
        document, report = self.export("nvtx_ranges")
        spans = report["range_spans"]
        self.assertTrue(spans)
        slices = [e for e in document["traceEvents"] if e["ph"] == "X" and e.get("cat") == "nvtx"]
        begins = [e for e in document["traceEvents"] if e["ph"] == "b" and e["cat"] == "nvtx"]
        ends = {e["id"]: e for e in document["traceEvents"] if e["ph"] == "e" and e["cat"] == "nvtx"}
        duration_us = report["trace"]["duration_ns"] / 1000

        def expected(span):
            end = span["end_ns"] if span["end_ns"] is not None else report["trace"]["duration_ns"]
            return (span["name"] or "(unnamed range)", span["thread_id"], round(span["start_ns"] / 1000, 3),
                    round(end / 1000, 3))

        push_pop = sorted(expected(s) for s in spans if s["depth"] >= 0)
        self.assertEqual(sorted((e["name"], e["tid"], round(e["ts"], 3), round(e["ts"] + e["dur"], 3)) for e in slices), push_pop)
        start_end = sorted(expected(s) for s in spans if s["depth"] < 0)
        self.assertEqual(sorted((e["name"], e["tid"], round(e["ts"], 3), round(ends[e["id"]]["ts"], 3)) for e in begins), start_end)
        self.assertTrue(all(e["ts"] + e["dur"] <= duration_us + 1e-6 for e in slices))
        # Slices of one thread nest: each starts after its enclosing one starts and ends before it ends.
        for tid in {e["tid"] for e in slices}:
            open_ends = []
            for e in sorted((e for e in slices if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
                while open_ends and open_ends[-1] <= e["ts"]:
                    open_ends.pop()
                if open_ends:
                    self.assertLessEqual(e["ts"] + e["dur"], open_ends[-1] + 1e-6, e)
                open_ends.append(e["ts"] + e["dur"])


    def allocation_slices(self, document):
        """The allocation slices as (begin, end) pairs, after checking that every one is closed once, by an end of
        its own id, category and name, not before it began, and that ids are unique."""
        events = [e for e in document["traceEvents"] if e["ph"] in ("b", "e") and e["cat"] in ("allocation", "block")]
        begins = [e for e in events if e["ph"] == "b"]
        ends = [e for e in events if e["ph"] == "e"]
        self.assertEqual(len({e["id"] for e in begins}), len(begins), "slice ids are not unique")
        self.assertEqual(len({e["id"] for e in ends}), len(ends))
        other_ids = {e["id"] for e in document["traceEvents"] if e["ph"] in ("b", "e") and e not in events}
        self.assertFalse(other_ids & {e["id"] for e in begins})
        end_of = {e["id"]: e for e in ends}
        pairs = []
        for begin in begins:
            end = end_of.pop(begin["id"], None)
            self.assertIsNotNone(end, f"slice never closed: {begin}")
            self.assertEqual((end["cat"], end["name"], end["pid"], end["tid"]),
                             (begin["cat"], begin["name"], begin["pid"], begin["tid"]))
            self.assertGreaterEqual(end["ts"], begin["ts"])
            pairs.append((begin, end))
        self.assertFalse(end_of, "ends without a begin")
        return pairs

    def test_allocations_are_slices_with_stacks(self):
        document, report = self.export("leaky")
        pairs = self.allocation_slices(document)
        summary = document["otherData"]["allocation_slices"]
        self.assertEqual(summary["shown"], len(pairs))
        self.assertEqual(summary["not_shown"], 0)
        self.assertEqual(summary["allocations"], report["totals"]["allocations"])
        self.assertEqual(sum(b["args"]["size_bytes"] for b, _ in pairs), report["totals"]["allocated_bytes"])
        live = [b for b, _ in pairs if b["args"]["live_at_end"]]
        self.assertEqual(sum(b["args"]["size_bytes"] for b in live), report["totals"]["leaked_bytes"])
        duration_us = report["trace"]["duration_ns"] / 1000
        for begin, end in pairs:
            if begin["args"]["live_at_end"]:
                self.assertAlmostEqual(end["ts"], duration_us, places=3)
        # Each leak's stack on its slices: the user's frame first, then the stack as the text report shows it.
        pids = self.process_ids(document)
        for leak in report["leaks"]:
            function = leak["stack"][0]["function"]
            mine = [b for b in live if b["args"]["user_frame"] and function in b["args"]["user_frame"]]
            self.assertEqual(len(mine), leak["count"], function)
            [device] = leak["devices"]
            for begin in mine:
                self.assertEqual(begin["pid"], pids[f"device {device}" if device >= 0 else "host memory"])
                self.assertIn(function, begin["args"]["stack"][0])
                self.assertEqual([begin["args"]["memory_kind"]], leak["memory_kinds"])

    def test_bounded_with_the_rest_summed(self):
        document, report = self.export("slow_leak", env={"GMT_SIM_DEVICE_BYTES": "1G"},
                                       report_args=("--max-allocations", "40"))
        pairs = self.allocation_slices(document)
        summary = document["otherData"]["allocation_slices"]
        self.assertLessEqual(len(pairs), 40)
        self.assertEqual(summary["shown"], len(pairs))
        self.assertGreater(summary["not_shown"], 0)
        self.assertEqual(summary["shown"] + summary["not_shown"], report["totals"]["allocations"])
        self.assertEqual(sum(b["args"]["size_bytes"] for b, _ in pairs) + summary["not_shown_bytes"],
                         report["totals"]["allocated_bytes"])
        self.assertEqual(summary["not_shown_by_device"]["device 0"]["bytes"], summary["not_shown_bytes"])
        # Spread over the run: 40 windows keep one allocation each, so the first and the last allocations' windows
        # have slices.
        window_us = report["trace"]["duration_ns"] / 40 / 1000
        starts = [b["ts"] for b, _ in pairs]
        self.assertLessEqual(min(starts), report["growth"]["start_ns"] / 1000 + window_us)
        self.assertGreaterEqual(max(starts), report["growth"]["end_ns"] / 1000 - window_us)

    def test_tensor_blocks_beside_cuda_allocations(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        document, report = self.export_trace(trace)
        pairs = self.allocation_slices(document)
        by_address = {}
        for begin, _ in pairs:
            by_address.setdefault(int(begin["args"]["address"], 16), []).append(begin)
        # PyTorch's cudaMalloc behind its segment is no slice of its own; the block at that address is one.
        self.assertEqual([b["cat"] for b in by_address[A]], ["block"])
        self.assertEqual([b["cat"] for b in by_address[B]], ["allocation"])
        self.assertEqual(by_address[B][0]["args"]["user_frame"].split(" ")[0], "nccl_buffer")
        self.assertEqual(by_address[F][0]["args"]["size_bytes"], 1 * MIB)
        live = sum(b["args"]["size_bytes"] for b, _ in pairs if b["args"]["live_at_end"])
        self.assertEqual(live, report["totals"]["leaked_bytes"])
        pids = self.process_ids(document)
        self.assertEqual({b["pid"] for b, _ in pairs}, {pids["device 0"], pids["device 1"]})


if __name__ == "__main__":
    unittest.main()
