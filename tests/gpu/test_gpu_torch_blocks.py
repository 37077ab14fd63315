"""The block-level mode on the GPU with the real PyTorch (`run --torch-blocks`, samples/torch_training_leak.py):
the leaking loop's block-level growth (over time and per repetition of the NVTX step range) names the line that
keeps the tensors (BLOCK-LEAK-SITE), which the CUDA level cannot; the fixed loop has no block-level finding; the
trace holds a plausible number of tensor blocks with monotonic times inside the run; and importing torch under
the mode initializes no CUDA. Prints FIGURE lines for docs/gpu-results.md. Exits 77 without a GPU or PyTorch."""
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, marker_line, report_json  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SAMPLE = os.path.join(SOURCE, "samples", "torch_training_leak.py")
IMPORT_AUDIT = os.path.join(HERE, "import_audit.py")
STEPS = 200



class GpuTorchBlocksTest(TraceDirTestCase):
    def run_sample(self, name, *args):
        trace = self.path(name)
        # Through import_audit.py: should the app's own imports fail, the imports made by other threads meanwhile
        # are in the message.
        result = subprocess.run([CLI, "run", "--torch-blocks", "-o", trace, "--", PYTHON, IMPORT_AUDIT, SAMPLE,
                                 "--steps", str(STEPS), *args], capture_output=True, text=True, timeout=600)
        imports = "\n".join(line for line in result.stderr.splitlines() if line.startswith("IMPORT"))
        self.assertEqual(result.returncode, 0, f"{imports}\n{result.stderr[-3000:]}")
        self.assertIn(f"steps {STEPS}", result.stdout)
        self.assertNotIn("block-level mode is off", result.stderr)
        self.assertNotIn("overran", result.stderr)
        # The mode imports what PyTorch's snapshots import on the app's thread, at CUDA's initialization: its
        # drain thread must import nothing (an import there broke the app's `import torch._dynamo`).
        self.assertNotIn("[gpumemtrace-torch-blocks]", imports)
        return trace, report_json(trace)

    def block_rows(self, trace):
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            allocs, frees, first, last = db.execute(
                "SELECT sum(kind = 1), sum(kind = 2), min(time_ns), max(time_ns) FROM events WHERE source = 4"
            ).fetchone()
        return meta, allocs or 0, frees or 0, first, last

    def test_leaking_loop_is_named_by_the_line_that_keeps_the_tensors(self):
        trace, report = self.run_sample("leak.db")
        site = f"{SAMPLE}:train_step:{marker_line('torch_training_leak.py', '# BLOCK-LEAK-SITE:')}"
        blocks = report["tensor_blocks"]
        self.assertIsNotNone(blocks)
        self.assertEqual(blocks["overruns"], 0)
        meta, allocs, frees, first, last = self.block_rows(trace)
        self.assertEqual(meta["tensor_blocks"], "1")
        self.assertGreater(allocs, STEPS)  # several tensors per step
        self.assertEqual(allocs, blocks["totals"]["allocations"])
        self.assertGreaterEqual(first, int(meta["start_monotonic_ns"]))
        self.assertLessEqual(last, int(meta["end_monotonic_ns"]))
        range_growth = [g for g in blocks["range_growth"] if g["name"] == "train step"]
        self.assertTrue(range_growth, "no block-level growth per repetition of 'train step'")
        self.assertEqual(range_growth[0]["stacks"][0]["python_line"], site, range_growth[0]["stacks"][0])
        findings = blocks["growth"]["findings"]
        self.assertTrue(findings, blocks["growth"])
        self.assertEqual(findings[0]["stacks"][0]["python_line"], site)
        # The kept tensors are alive at exit, under the same line; at most the model's own tensors besides.
        alive = blocks["alive_at_exit"]
        self.assertTrue(alive and alive[0]["python_line"] == site, [a["python_line"] for a in alive])
        # Blocks never enter the CUDA-level numbers: no CUDA-level event has the tensor_block kind.
        self.assertNotIn("tensor_block", [k for leak in report["leaks"] for k in leak["memory_kinds"]])
        print(f"FIGURE torch blocks: {allocs} tensor blocks ({frees} freed) in {STEPS} steps; 'train step' keeps "
              f"{range_growth[0]['bytes_per_iteration'] / 2**20:.1f} MiB per repetition at {site}; alive at exit "
              f"{blocks['totals']['leaked_bytes'] / 2**20:.1f} MiB; CUDA-level peak {report['totals']['peak_bytes'] / 2**20:.1f} MiB")

    def test_fixed_loop_has_no_block_level_finding(self):
        trace, report = self.run_sample("fixed.db", "--fixed")
        blocks = report["tensor_blocks"]
        self.assertEqual(blocks["growth"]["findings"], [], blocks["growth"])
        self.assertEqual(blocks["range_growth"], [])
        _, allocs, _, _, _ = self.block_rows(trace)
        self.assertGreater(allocs, STEPS)
        print(f"FIGURE torch blocks, fixed loop: {allocs} tensor blocks, no block-level finding")

    def test_importing_torch_under_the_mode_initializes_no_cuda(self):
        trace = self.path("import.db")
        result = subprocess.run([CLI, "run", "--torch-blocks", "-q", "-o", trace, "--", PYTHON, "-c",
                                 "import torch; print('initialized', torch.cuda.is_initialized())"],
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("initialized False", result.stdout)
        if os.path.exists(trace):
            with sqlite3.connect(trace) as db:
                self.assertIsNone(db.execute("SELECT value FROM meta WHERE key = 'tensor_blocks'").fetchone())


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    if not have_torch_cuda(PYTHON):
        print("SKIP: no PyTorch with CUDA here")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
