"""Damaged H200 traces give back what they can (issue 26, point 2; docs/reliability.md, "Damaged traces"): traces
recorded on the GPU (a C++ sample under the driver hooks, a PyTorch service with tensor blocks, NVTX ranges and
Python frames) are damaged at random by tests/reliability/damaged_traces (500 copies each: truncations and
overwrites), each copy analyzed as `report` does. Every copy must be refused with a message naming the file, or be
salvaged and marked incomplete, or (an overwrite SQLite cannot notice) still find the trace's leaks: never a crash
or a clean verdict. The simulated-runtime traces get the same in CI (tests/reliability/test_damaged_traces.py).
Exits 77 without a GPU."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
RELIABILITY_BIN = os.environ["GMT_RELIABILITY_BIN"]
COPIES = 500
CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gmt-gpu-torch-bridge-cache")


class GpuDamagedTracesTest(TraceDirTestCase):
    def damage(self, name, trace, seed):
        work = tempfile.mkdtemp(prefix="work-", dir=self.dir)
        tmp = tempfile.mkdtemp(prefix="tmp-", dir=self.dir)
        result = subprocess.run([os.path.join(RELIABILITY_BIN, "damaged_traces"), trace, str(COPIES), str(seed), work],
                                capture_output=True, text=True, timeout=600, env=dict(os.environ, TMPDIR=tmp))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr[-3000:])
        counts = re.search(r"(\d+) damaged copies: (\d+) refused with a message, (\d+) salvaged, (\d+) reported "
                           r"unnoticed", result.stdout)
        self.assertIsNotNone(counts, result.stdout)
        self.assertEqual(int(counts.group(1)), COPIES)
        self.assertEqual(os.listdir(tmp), [], "the salvage left temporary files behind")
        print(f"FIGURE damaged {name} trace ({os.path.getsize(trace)} B): {result.stdout.strip()}")

    def record(self, name, *command, env=None):
        trace = self.path(name + ".db")
        result = subprocess.run([CLI, "run", "-q", "-o", trace, "--", *command], capture_output=True, text=True,
                                timeout=600, env=dict(os.environ, **(env or {})))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return trace

    def test_a_cuda_sample_under_the_hooks(self):
        trace = self.record("leaky", sample("leaky"))
        self.damage("leaky (hooks)", trace, 26)

    def test_b_pytorch_service_with_tensor_blocks(self):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        trace = self.record("torch-dict", PYTHON, os.path.join(SOURCE, "samples", "torch_dict_leak.py"),
                            "--requests", "100", env={"GMT_TORCH_BRIDGE_CACHE": CACHE})
        self.damage("PyTorch dict leak", trace, 27)


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
