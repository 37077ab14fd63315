"""The block-level mode for PyTorch (`run --torch-blocks`) against the fake torch of fixtures_blocks/ (a labelled
test fixture: CI has no PyTorch): the tensor blocks in the trace (bytes, counts, Python frames, monotonic times
within the run), several drains of a ring that wraps losing nothing, an overrun counted, the report's block-level
section naming the kept tensors' line, and the CUDA-level numbers unchanged by the mode."""
import json
import os
import sqlite3
import sys
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "blocks_app.py")
FIXTURE = os.path.join(HERE, "fixtures_blocks")
STEPS = 60
KEPT_BYTES = 2 << 20
TEMP_BYTES = 1 << 20
TORCH_ALLOCATOR = 4  # schema Source::TorchAllocator
TENSOR_BLOCK = 6     # schema MemoryKind::TensorBlock


def marker(text):
    with open(APP) as f:
        for number, line in enumerate(f, 1):
            if text in line:
                return number
    raise AssertionError(text)


class TorchBlocksTest(TraceDirTestCase):
    def run_app(self, name, *options, drain_every=5, entries=None, app_args=()):
        env = {"PYTHONPATH": FIXTURE}
        if entries is not None:
            env["GMT_TORCH_BLOCKS_ENTRIES"] = str(entries)
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", "-o", trace, *options, "--", sys.executable, APP, str(STEPS),
                         str(drain_every), *app_args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        seen = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        return trace, seen, result.stderr

    def blocks(self, trace):
        db = sqlite3.connect(trace)
        try:
            rows = db.execute("SELECT id, time_ns, kind, api, memory_kind, address, size, stack_id, device "
                              "FROM events WHERE source = ? ORDER BY id", (TORCH_ALLOCATOR,)).fetchall()
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            frames = {}
            for stack_id in {row[7] for row in rows if row[7]}:
                frames[stack_id] = db.execute(
                    "SELECT fl.text, fn.text, p.line, f.pc FROM stack_frames f "
                    "JOIN python_frames p ON p.id = f.python_frame_id JOIN strings fl ON fl.id = p.file_id "
                    "JOIN strings fn ON fn.id = p.function_id WHERE f.stack_id = ? ORDER BY f.level",
                    (stack_id,)).fetchall()
            return rows, meta, frames
        finally:
            db.close()

    def test_tensor_blocks_in_the_trace_are_exact(self):
        # A ring of 64 entries wraps between drains (5 steps = 50 entries, a wrap every ~1.3 drains): nothing lost.
        trace, seen, stderr = self.run_app("blocks.db", "--torch-blocks", entries=64)
        self.assertEqual(seen["history_started_at_import"], "False")  # importing torch initializes nothing
        self.assertEqual(seen["history_before_init"], "False")  # enabled at CUDA's lazy init, not before
        self.assertEqual(json.loads(seen["history"]),
                         {"enabled": "all", "context": "alloc", "stacks": "python", "max_entries": 64,
                          "skip_actions": ["free_requested", "segment_alloc", "segment_free", "segment_map",
                                           "segment_unmap", "snapshot"]})
        self.assertEqual(seen["oom_drained"], "True")
        rows, meta, frames = self.blocks(trace)
        self.assertEqual(meta["tensor_blocks"], "1")
        self.assertEqual(meta["tensor_blocks_overruns"], "0")
        self.assertNotIn("overran", stderr)
        allocs = [r for r in rows if r[2] == 1]
        frees = [r for r in rows if r[2] == 2]
        self.assertEqual(len(allocs), STEPS * 4)
        self.assertEqual(len(frees), STEPS * 3)  # free_completed only; the kept blocks were alive at the exit drain
        self.assertTrue(all(r[4] == TENSOR_BLOCK and r[8] == 0 for r in rows))
        self.assertEqual({r[3] for r in allocs}, {45})  # torchBlockAlloc
        self.assertEqual({r[3] for r in frees}, {46})   # torchBlockFree
        self.assertEqual(sorted({r[6] for r in allocs}), [TEMP_BYTES, KEPT_BYTES])
        self.assertEqual(sum(r[6] for r in allocs), STEPS * (3 * TEMP_BYTES + KEPT_BYTES))
        self.assertTrue(all(r[6] == 0 for r in frees))
        # Every free releases the block allocated last at its address.
        live = {}
        for r in rows:
            if r[2] == 1:
                self.assertNotIn(r[5], live)
                live[r[5]] = r[6]
            else:
                self.assertEqual(live.pop(r[5]), TEMP_BYTES)
        self.assertEqual(sorted(live.values()), [KEPT_BYTES] * STEPS)
        # Times: the trace's CLOCK_MONOTONIC, inside the loop (PyTorch stamps microseconds), in id order.
        times = [r[1] for r in rows]
        self.assertEqual(times, sorted(times))
        first, last = int(seen["first_ns"]), int(seen["last_ns"])
        self.assertGreaterEqual(min(times), first - 2_000_000)
        self.assertLessEqual(max(times), last + 2_000_000)
        self.assertGreaterEqual(min(times), int(meta["start_monotonic_ns"]))
        self.assertLessEqual(max(times), int(meta["end_monotonic_ns"]))
        # Python frames, innermost first: the allocating line, then the loop that called it.
        kept_stacks = {r[7] for r in allocs if r[6] == KEPT_BYTES}
        self.assertEqual(len(kept_stacks), 1)
        kept = frames[kept_stacks.pop()]
        self.assertEqual(kept[0], (APP, "make_activation", marker("BLOCK-KEPT"), 0))
        self.assertEqual(kept[1], (APP, "<module>", marker("BLOCK-LOOP"), 0))
        self.assertEqual(len(kept), 2)
        temp_stacks = {r[7] for r in allocs if r[6] == TEMP_BYTES}
        self.assertEqual(len(temp_stacks), 1)
        self.assertEqual(frames[temp_stacks.pop()][0][:3], (APP, "temporary", marker("BLOCK-TEMP")))
        self.assertTrue(all(r[7] == 0 for r in frees))

    def test_report_names_the_kept_tensors_line_and_leaves_device_totals_alone(self):
        with_blocks, _, _ = self.run_app("with.db", "--torch-blocks")
        without, _, _ = self.run_app("without.db")
        on, off = report_json(with_blocks), report_json(without)
        self.assertIsNone(off["tensor_blocks"])
        # The CUDA level is the same with or without the mode: one 256 MiB segment, never freed.
        for key in ("allocations", "allocated_bytes", "frees", "leaked_bytes", "leaked_allocations", "peak_bytes"):
            self.assertEqual(on["totals"][key], off["totals"][key], key)
        self.assertEqual(on["totals"]["allocated_bytes"], 256 << 20)
        self.assertEqual(on["peak_by_kind"], off["peak_by_kind"])
        self.assertEqual([leak["bytes"] for leak in on["leaks"]], [256 << 20])
        blocks = on["tensor_blocks"]
        self.assertEqual(blocks["totals"]["allocations"], STEPS * 4)
        self.assertEqual(blocks["totals"]["frees"], STEPS * 3)
        self.assertEqual(blocks["totals"]["leaked_bytes"], STEPS * KEPT_BYTES)
        self.assertEqual(blocks["totals"]["leaked_allocations"], STEPS)
        self.assertEqual(blocks["totals"]["peak_bytes"], STEPS * KEPT_BYTES + TEMP_BYTES)  # last step: 2 kept short + 3 temps
        kept_line = f"{APP}:make_activation:{marker('BLOCK-KEPT')}"
        self.assertEqual(len(blocks["alive_at_exit"]), 1)
        self.assertEqual(blocks["alive_at_exit"][0]["python_line"], kept_line)
        self.assertEqual(blocks["alive_at_exit"][0]["memory_kinds"], ["tensor_block"])
        self.assertEqual(blocks["alive_at_exit"][0]["bytes"], STEPS * KEPT_BYTES)
        finding = blocks["growth"]["findings"]
        self.assertEqual(len(finding), 1, blocks["growth"])
        self.assertEqual(finding[0]["stacks"][0]["python_line"], kept_line)
        # The CUDA-level growth is not fooled by blocks: one segment, nothing grows.
        self.assertEqual(on["growth"]["findings"], [])
        text = run_cli("report", with_blocks)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("PyTorch tensors (block-level", text.stdout)
        self.assertIn(f"at make_activation {APP}:{marker('BLOCK-KEPT')}", text.stdout)
        self.assertIn("tensors alive at exit: 120.00 MiB", text.stdout)
        html = run_cli("report", "--format", "html", with_blocks)
        self.assertIn("PyTorch tensors (block-level)", html.stdout)
        self.assertIn(kept_line, html.stdout)

    def test_an_overrun_ring_is_counted_and_said(self):
        trace, _, stderr = self.run_app("overrun.db", "--torch-blocks", drain_every=10, entries=16)
        self.assertIn("overran", stderr)
        rows, meta, _ = self.blocks(trace)
        overruns = int(meta["tensor_blocks_overruns"])
        self.assertGreaterEqual(overruns, 1)
        self.assertLess(len([r for r in rows if r[2] == 1]), STEPS * 4)  # blocks were lost, as said
        self.assertEqual(report_json(trace)["tensor_blocks"]["overruns"], overruns)

    def test_the_drain_thread_imports_nothing(self):
        # PyTorch's snapshot imports torch._inductor (a lazy submodule) when it symbolizes Python frames. From the
        # drain thread that import raced the app's `import torch._dynamo` and broke it on the H200, so the mode
        # imports it on the app's thread at CUDA's initialization: the drain thread's snapshots import nothing.
        trace, seen, stderr = self.run_app("imports.db", "--torch-blocks", drain_every=STEPS + 1,
                                           app_args=["--wait-for-drain-thread"])
        self.assertIn("gpumemtrace-torch-blocks", json.loads(seen["snapshot_threads"]))
        imports = json.loads(seen["imports"])
        self.assertEqual([thread for thread, _ in imports if thread != "MainThread"], [], imports)
        self.assertEqual(seen["inductor_imported_by"], "MainThread")
        rows, meta, _ = self.blocks(trace)
        self.assertEqual(len([r for r in rows if r[2] == 1]), STEPS * 4)
        self.assertEqual(meta["tensor_blocks_overruns"], "0")
        self.assertNotIn("failed", stderr)

    def test_torch_blocks_needs_the_python_hooks(self):
        result = run_cli("run", "--simulate", "--torch-blocks", "--no-python-hooks", "--", sys.executable, "-c", "0")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--torch-blocks needs the in-process Python hooks", result.stderr)


if __name__ == "__main__":
    unittest.main()
