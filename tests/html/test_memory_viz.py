"""`report --format memory-viz`: PyTorch's memory snapshot, loaded with Python's pickle and checked against the trace.
Per device, the bytes of the `alloc` actions minus those of the `free_completed` actions are what the app held at the
end (the JSON report's totals, and the fixture's known truth); each segment's blocks cover it exactly, and its live
blocks are what the trace says the segment held. Traces: a plain CUDA program (samples/leaky: each allocation a
segment of its own), an NVTX-memory-API heap (samples/nvtx_heap: blocks inside the heap's segment), and a trace
shaped like a PyTorch program's (torch_shaped_trace.py: blocks inside PyTorch's segments beside a library's
cudaMalloc, two devices). PyTorch's own reader runs on these in test_memory_viz_torch.py."""
import collections
import os
import pickle
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from torch_shaped_trace import (A, B, C, F, LIVE_AT_END, MIB, R_LARGE, R_SMALL, REPLAYED_LARGE, REPLAYED_SMALL,
                                SEGMENTS_AT_END, X, add_expandable_segment, make_replayable_torch_trace,
                                make_torch_shaped_trace)


def snapshot_of(test, trace, *extra, stderr=None):
    out = test.path("snap.pickle")
    result = run_cli("report", "--format", "memory-viz", "-o", out, *extra, trace)
    test.assertEqual(result.returncode, 0, result.stderr)
    if stderr is not None:
        stderr.append(result.stderr)
    with open(out, "rb") as f:
        return pickle.load(f)


def blocks_in(snapshot, address):
    [segment] = [s for s in snapshot["segments"] if s["address"] == address]
    return [(b["address"] - address, b["size"], b["requested_size"], b["state"]) for b in segment["blocks"]]


def live_by_device(snapshot):
    """Per device: alloc bytes minus free_completed bytes over its actions."""
    live = {}
    for device, entries in enumerate(snapshot["device_traces"]):
        total = 0
        for entry in entries:
            if entry["action"] == "alloc":
                total += entry["size"]
            elif entry["action"] == "free_completed":
                total -= entry["size"]
        if entries:
            live[device] = total
    return live


class MemoryVizTest(TraceDirTestCase):
    def check_shape(self, snapshot):
        self.assertEqual(set(snapshot) >= {"segments", "device_traces", "allocator_settings"}, True)
        for segment in snapshot["segments"]:
            blocks = segment["blocks"]
            self.assertEqual(sum(b["size"] for b in blocks), segment["total_size"], segment)
            allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
            self.assertEqual(allocated, segment["allocated_size"])
            active = [b for b in blocks if b["state"] in ("active_allocated", "active_pending_free")]
            self.assertEqual(sum(b["size"] for b in active), segment["active_size"])
            self.assertEqual(sum(b["requested_size"] for b in active), segment["requested_size"])
            # Blocks in address order, back to back from the segment's start.
            cursor = segment["address"]
            for block in blocks:
                self.assertEqual(block["address"], cursor)
                self.assertIn(block["state"], ("active_allocated", "active_pending_free", "inactive"))
                self.assertLessEqual(block["requested_size"], block["size"])
                for frame in block["frames"]:
                    self.assertEqual(set(frame), {"filename", "line", "name"})
                cursor += block["size"]
        for entries in snapshot["device_traces"]:
            times = [entry["time_us"] for entry in entries]
            self.assertEqual(times, sorted(times))
            for entry in entries:
                self.assertIn(entry["action"],
                              ("segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"))

    def test_plain_cuda_program(self):
        trace = self.path("leaky.db")
        result = run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)
        snapshot = snapshot_of(self, trace)
        self.check_shape(snapshot)
        report = report_json(trace, "--top", "1000")
        # What the app held at the end per device, from the leak groups (pinned host memory, device -1, has no
        # place in a per-device snapshot).
        held, held_count = collections.Counter(), collections.Counter()
        for leak in report["leaks"]:
            [device] = leak["devices"]
            held[device] += leak["bytes"]
            held_count[device] += leak["count"]
        self.assertEqual(sum(held.values()), report["totals"]["leaked_bytes"])
        self.assertIn(-1, held)
        self.assertEqual(live_by_device(snapshot), {d: b for d, b in held.items() if d >= 0})
        self.assertEqual(snapshot["gpumemtrace"]["host_allocations_left_out"] > 0, True)
        # Each live allocation its own segment of type "cuda", holding one block of its size.
        self.assertEqual(len(snapshot["segments"]), sum(n for d, n in held_count.items() if d >= 0))
        for segment in snapshot["segments"]:
            self.assertEqual(segment["segment_type"], "cuda")
            [block] = segment["blocks"]
            self.assertEqual((block["address"], block["size"]), (segment["address"], segment["total_size"]))
        # Every device allocation of the trace is there once.
        db = sqlite3.connect(trace)
        count, total = db.execute("SELECT count(*), sum(size) FROM events WHERE kind = 1 AND device >= 0 AND "
                                  "address != 0").fetchone()
        db.close()
        allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
        self.assertEqual((len(allocs), sum(e["size"] for e in allocs)), (count, total))
        # With its stack: each leaking site's frames by name.
        names = {frame["name"] for segment in snapshot["segments"] for frame in segment["blocks"][0]["frames"]}
        for leak in report["leaks"]:
            if leak["devices"] != [-1]:
                self.assertIn(leak["stack"][0]["function"], names)

    def test_nvtx_heap_segments(self):
        trace = self.path("heap.db")
        result = run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("nvtx_heap"))
        self.assertEqual(result.returncode, 0, result.stderr)
        snapshot = snapshot_of(self, trace)
        self.check_shape(snapshot)
        # The heap's segments and their live regions, replayed from the trace's own rows.
        db = sqlite3.connect(trace)
        segments, regions = {}, {}
        for kind, address, size, device in db.execute(
                "SELECT kind, address, size, device FROM events WHERE source = 5 ORDER BY time_ns, id"):
            if kind == 22:
                segments[address] = (size, device)
            elif kind == 23:
                segments.pop(address, None)
            elif kind == 1:
                regions[address] = size
            elif kind == 2:
                regions.pop(address, None)
        db.close()
        self.assertTrue(segments)
        by_address = {s["address"]: s for s in snapshot["segments"]}
        for address, (size, device) in segments.items():
            segment = by_address[address]
            self.assertEqual((segment["total_size"], segment["device"]), (size, device))
            held = sum(s for a, s in regions.items() if address <= a < address + size)
            self.assertEqual(segment["allocated_size"], held)
            self.assertGreater(len([b for b in segment["blocks"] if b["state"] == "inactive"]), 0)
        self.assertEqual(sum(live_by_device(snapshot).values()), report_json(trace)["totals"]["leaked_bytes"])

    def test_torch_shaped_trace(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        snapshot = snapshot_of(self, trace)
        self.check_shape(snapshot)
        self.assertEqual(live_by_device(snapshot), LIVE_AT_END)
        self.assertEqual(sum(LIVE_AT_END.values()), report_json(trace)["totals"]["leaked_bytes"])
        segments = {(s["device"], s["address"]): (s["total_size"], s["allocated_size"], s["segment_type"])
                    for s in snapshot["segments"]}
        self.assertEqual(segments, SEGMENTS_AT_END)
        [weights] = [s for s in snapshot["segments"] if s["address"] == A]
        self.assertEqual([(b["address"] - A, b["size"], b["state"]) for b in weights["blocks"]],
                         [(0, 3 * MIB, "active_allocated"), (3 * MIB, 3 * MIB, "inactive"),
                          (6 * MIB, 1 * MIB, "active_allocated"), (7 * MIB, 13 * MIB, "inactive")])
        self.assertEqual(weights["blocks"][2]["frames"][0]["name"], "forward_activations")
        # PyTorch's own cudaMalloc behind its segment is the segment, not a second one; the library's is its own.
        actions = collections.Counter((e["action"], e["addr"]) for e in snapshot["device_traces"][0])
        self.assertEqual(actions[("segment_alloc", A)], 1)
        self.assertEqual(actions[("alloc", A)], 1)  # the block at the segment's start, not the cudaMalloc
        self.assertEqual(actions[("segment_alloc", B)], 1)
        self.assertEqual(actions[("alloc", B)], 1)
        self.assertEqual((actions[("segment_alloc", C)], actions[("segment_free", C)]), (1, 1))
        self.assertEqual(actions[("alloc", F)], 1)
        [nccl] = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc" and e["addr"] == B]
        self.assertEqual(nccl["frames"][0]["name"], "nccl_buffer")

    def test_expandable_segment_is_one_segment(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        add_expandable_segment(trace)
        snapshot = snapshot_of(self, trace)
        self.check_shape(snapshot)
        [segment] = [s for s in snapshot["segments"] if s["device"] == 2]
        self.assertEqual((segment["address"], segment["total_size"], segment["is_expandable"]), (X, 4 * MIB, True))
        self.assertEqual([(b["address"] - X, b["size"], b["state"]) for b in segment["blocks"]],
                         [(0, MIB, "inactive"), (MIB, 2 * MIB, "active_allocated"), (3 * MIB, MIB, "inactive")])
        self.assertEqual(live_by_device(snapshot)[2], 2 * MIB)
        self.assertEqual(snapshot["gpumemtrace"]["blocks_outside_segments"], 1)  # F only

    def test_blocks_have_pytorchs_sizes_where_the_replay_reproduces_the_recording(self):
        trace = self.path("replayable.db")
        make_replayable_torch_trace(trace)
        stderr = []
        snapshot = snapshot_of(self, trace, stderr=stderr)
        self.assertNotIn("memory-viz", stderr[0])
        self.check_shape(snapshot)
        self.assertEqual((snapshot["gpumemtrace"]["block_sizes"], snapshot["gpumemtrace"]["block_sizes_note"]),
                         ("replayed", ""))
        self.assertEqual(blocks_in(snapshot, R_LARGE), REPLAYED_LARGE)
        self.assertEqual(blocks_in(snapshot, R_SMALL), REPLAYED_SMALL)
        figures = {s["address"]: (s["allocated_size"], s["active_size"], s["requested_size"])
                   for s in snapshot["segments"]}
        self.assertEqual(figures, {R_LARGE: (20 * MIB, 20 * MIB, 19 * MIB + 100), R_SMALL: (2048, 6144, 5700)})
        # The history keeps what each tensor asked for, as PyTorch's own does.
        self.assertEqual(live_by_device(snapshot), {0: 19 * MIB + 100 + 1000 + 700 + 4000})

    def test_an_older_trace_keeps_the_requested_sizes_and_says_why(self):
        trace = self.path("older.db")
        make_replayable_torch_trace(trace, older=True)
        stderr = []
        snapshot = snapshot_of(self, trace, stderr=stderr)
        self.check_shape(snapshot)
        why = ("the trace was recorded with schema 9, before PyTorch's allocator settings and calls were recorded "
               "(v10)")
        lines = [line for line in stderr[0].splitlines() if "memory-viz" in line]
        self.assertEqual(lines, ["gpumemtrace: memory-viz: PyTorch's blocks keep their requested sizes, not the "
                                 "rounded ones its own snapshot shows: " + why])
        self.assertEqual((snapshot["gpumemtrace"]["block_sizes"], snapshot["gpumemtrace"]["block_sizes_note"]),
                         ("requested", why))
        self.assertEqual(blocks_in(snapshot, R_LARGE),
                         [(0, 3 * MIB, 3 * MIB, "active_allocated"),
                          (3 * MIB, 16 * MIB + 100, 16 * MIB + 100, "active_allocated"),
                          (19 * MIB + 100, MIB - 100, 0, "inactive")])

    def test_device_filter(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        snapshot = snapshot_of(self, trace, "--device", "1")
        self.assertEqual(live_by_device(snapshot), {1: LIVE_AT_END[1]})
        self.assertEqual([(s["device"], s["total_size"]) for s in snapshot["segments"]], [(1, 4 * MIB)])

    def test_damaged_trace_is_refused(self):
        trace = self.path("leaky.db")
        result = run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(trace, "r+b") as f:  # half: the salvage reads what is left, memory-viz refuses it
            f.truncate(os.path.getsize(trace) // 2)
        result = run_cli("report", "--format", "memory-viz", "-o", self.path("snap.pickle"), trace)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("--format memory-viz", result.stderr)


if __name__ == "__main__":
    unittest.main()
