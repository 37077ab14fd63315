"""One answer per event, at the level where it happened (issue 34), on the GPU with the real PyTorch: (1) a
fragmentation OOM inside PyTorch's cache (samples/torch_oom_fragmented.py) is one finding, the block-level failure with
its label, first in `run`'s summary and in the findings, with the cudaMalloc attempts made inside it as its evidence;
(2) a custom stream-ordered pool that grows fast (samples/pool_growth) is never reported reserving less than it used;
(3) a training loop's gradients, made on autograd's device thread and kept (samples/torch_backward_leak.py), are
linked to the backward() line; (4) CuPy's arrays alive at exit (samples/cupy_leak.py) are the leak at the line that
made them, its pool's chunks cached at exit, with the cost per array.
Prints FIGURE lines for docs/gpu-results.md. Exits 77 without a GPU."""
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, marker_line, report_json, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
MiB = 1 << 20


def mib_text(value):
    return f"{value / MiB:.2f} MiB"


class GpuAnswersTest(TraceDirTestCase):
    figures = []

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def run_app(self, name, *command, env=None, options=()):
        trace = self.path(name)
        result = subprocess.run([CLI, "run", "-o", trace, *options, "--", *command], capture_output=True, text=True,
                                timeout=600, env=dict(os.environ, **(env or {})))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return trace, result

    def test_1_a_fragmentation_oom_is_one_finding_at_the_block_level(self):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        script = os.path.join(SOURCE, "samples", "torch_oom_fragmented.py")
        trace, result = self.run_app("oom.db", PYTHON, script,
                                     env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"})
        self.assertIn("caught OutOfMemoryError", result.stdout)
        printed = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.count(" ") == 1)
        cached_free = int(printed["cached_free_bytes"])
        lines = result.stderr.splitlines()
        findings = lines.index("  findings, largest first:")
        first = lines[findings + 1]
        self.assertTrue(first.startswith("    1. failed allocation of 340.00 MiB on device 0: fragmentation inside "
                                         f"PyTorch's caching allocator's cache ({mib_text(cached_free)} free in it, "
                                         "largest free block 13.00 MiB)"), "\n".join(lines))
        self.assertIn(f"torch_oom_fragmented.py:{marker_line('torch_oom_fragmented.py', 'FRAGMENTED-OOM')}",
                      lines[findings + 2])
        self.assertTrue(lines[findings + 3].startswith("       inside it 2 CUDA-level cudaMalloc attempts failed "
                                                       "(out of memory)"), lines[findings + 3])
        self.assertNotIn("(less memory was free than requested)", result.stderr)
        self.assertIn("  CUDA level: ", result.stderr)
        self.assertIn("failed allocations 0 (and 2 made inside the failed request below)", result.stderr)
        self.assertIn("  block level (PyTorch's caching allocator): blocks ", result.stderr)
        report = report_json(trace)
        [failure] = report["failures"]
        self.assertEqual((failure["api"], failure["label"]), ("torch_block_alloc", "heap fragmentation"))
        self.assertEqual([a["api"] for a in failure["attempts"]], ["cudaMalloc", "cudaMalloc"])
        self.assertEqual({a["label"] for a in failure["attempts"]}, {"out of memory"})
        self.assertEqual(report["totals"]["failed_attempts_in_requests"], 2)
        self.figures.append(f"fragmentation OOM: {first.strip()}; {lines[findings + 3].strip()}; device free "
                            f"{printed['device_free_bytes']} B before the request")

    def test_2_a_pool_is_never_reported_reserving_less_than_it_used(self):
        trace, result = self.run_app("pool.db", sample("pool_growth"))
        report = report_json(trace)
        pools = {p["kind"]: p for p in report["pools"]}
        created = pools["created"]
        self.assertEqual(created["peak_used_bytes"], 150 * MiB)
        self.assertGreaterEqual(created["samples"], 2)
        for pool in report["pools"]:
            self.assertGreaterEqual(pool["peak_reserved_bytes"], pool["peak_used_bytes"], pool)
            self.assertEqual(pool["reserved_sampled"], pool["samples"] > 0)
        # Release threshold UINT64_MAX: the driver keeps at least the 150 MiB, and the sample at exit sees it.
        self.assertGreaterEqual(created["sampled_peak_reserved_bytes"], 150 * MiB)
        self.assertGreaterEqual(created["last_reserved_bytes"], 150 * MiB)
        text = subprocess.run([CLI, "report", trace], capture_output=True, text=True).stdout
        self.assertIn("peak at least", text)
        self.figures.append(f"custom pool: used peak {created['peak_used_bytes']} B, reserved peak at least "
                            f"{created['peak_reserved_bytes']} B from {created['samples']} samples (sampled "
                            f"{created['sampled_peak_reserved_bytes']} B), {created['last_reserved_bytes']} B at exit")

    def test_3_backward_gradients_are_linked_to_the_backward_line(self):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        script = os.path.join(SOURCE, "samples", "torch_backward_leak.py")
        trace, result = self.run_app("backward.db", PYTHON, script)
        printed = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.count(" ") == 1)
        steps, gradient = int(printed["steps"]), int(printed["gradient_bytes"])
        line = marker_line("torch_backward_leak.py", "BACKWARD-LINE")
        report = report_json(trace)
        linked = [leak for leak in report["leaks"] if leak["during"] and leak["during"]["caller_known"]]
        self.assertTrue(linked, [(leak["bytes"], leak["python_line"]) for leak in report["leaks"]])
        self.assertEqual(linked[0]["during"]["python_line"], f"{script}:<module>:{line}")
        self.assertGreaterEqual(linked[0]["bytes"], steps * gradient)
        # The worker's own stack stays as it was: libtorch's frames, no Python frame.
        self.assertFalse([frame for frame in linked[0]["stack"] if frame["python"]])
        during = [f["during"] for f in report["findings"] if f["during"]]
        self.assertIn(f"during backward() at <module> {script}:{line}", during)
        self.assertIn(f"during backward() at <module> {script}:{line}", result.stderr)
        self.figures.append(f"backward(): {linked[0]['count']} blocks, {linked[0]['bytes']} B made by autograd's "
                            f"worker threads linked to torch_backward_leak.py:{line}")

    def test_4_cupy_arrays_alive_at_exit_are_named_at_their_line(self):
        if subprocess.run([PYTHON, "-c", "import cupy; cupy.cuda.runtime.getDeviceCount()"],
                          capture_output=True).returncode != 0:
            self.skipTest("no CuPy with CUDA here")
        script = os.path.join(SOURCE, "samples", "cupy_leak.py")
        trace, result = self.run_app("cupy.db", PYTHON, script)
        printed = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.count(" ") == 1)
        steps, kept = int(printed["steps"]), int(printed["kept_bytes"])
        report = report_json(trace)
        line = marker_line("cupy_leak.py", "KEPT-LINE")
        leaks = [leak for leak in report["leaks"] if leak["apis"] == ["cupy_block_alloc"]]
        self.assertTrue(leaks, [(leak["apis"], leak["python_line"]) for leak in report["leaks"]])
        self.assertEqual(leaks[0]["python_line"], f"{script}:<module>:{line}")
        self.assertEqual((leaks[0]["count"], leaks[0]["bytes"]), (steps, steps * kept))
        heaps = {h["allocator"]: h for h in report["cached_at_exit"]["heaps"]}
        pool = heaps["CuPy's memory pool"]
        self.assertTrue(pool["cached"])
        self.assertEqual(pool["reserved_bytes"], int(printed["pool_total"]))
        self.assertIn("  block level (CuPy's memory pool): blocks ", result.stderr)
        # The cost per array: CuPy's empty+del with blocks recorded against the same run without (--no-torch-blocks).
        _, plain = self.run_app("cupy-plain.db", PYTHON, script, options=["--no-torch-blocks"])
        costs = {}
        for name, out in (("recorded", result.stdout), ("plain", plain.stdout)):
            costs[name] = float(dict(l.split(" ", 1) for l in out.splitlines() if l.count(" ") == 1)["ns_per_array"])
        self.figures.append(f"CuPy: {steps} arrays of {kept} B alive at exit named at cupy_leak.py:{line}; pool "
                            f"{pool['reserved_bytes']} B cached at exit; empty+del {costs['recorded']:.0f} ns per "
                            f"array recorded, {costs['plain']:.0f} ns with blocks off")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); the GPU suite runs on the H200 via "
              "scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
