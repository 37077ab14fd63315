"""NVTX on the GPU: the application's ranges are captured under the driver-level backends exactly as under the
simulated runtime, and a PyTorch script's torch.cuda.nvtx ranges land in the trace. Skips without a GPU."""
import collections
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "nvtx"))
from gmt_e2e import CLI, TraceDirTestCase, parse_truth, report_json, run_cli  # noqa: E402
from nvtx_support import EXPECTED_MARKS, EXPECTED_RANGES, NVTX_SAMPLE, read_marks, read_ranges  # noqa: E402
from test_gpu_samples import SKIP, have_gpu  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")

TORCH_SCRIPT = """
import torch
kept = []
for step in range(5):
    torch.cuda.nvtx.range_push("train step")
    x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
torch.cuda.nvtx.mark("done")
"""


class GpuNvtxTest(TraceDirTestCase):
    def test_sample_ranges_under_each_backend(self):
        for backend in ("cupti", "hooks"):
            with self.subTest(backend=backend):
                trace = self.path(f"nvtx-{backend}.db")
                result = run_cli("run", "--backend", backend, "-o", trace, "--", NVTX_SAMPLE)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual(collections.Counter(r.key for r in read_ranges(trace)), EXPECTED_RANGES)
                self.assertEqual(read_marks(trace), EXPECTED_MARKS)
                report = report_json(trace)
                self.assertEqual(report["trace"]["backend"], backend)
                self.assertEqual(report["totals"]["leaked_bytes"], parse_truth(result.stdout)[0]["leaked_bytes"])

    def test_torch_nvtx_ranges(self):
        if subprocess.run([PYTHON, "-c", "import torch; assert torch.cuda.is_available()"],
                          capture_output=True).returncode != 0:
            self.skipTest("no PyTorch with CUDA here")
        script = self.path("torch_nvtx.py")
        with open(script, "w") as f:
            f.write(TORCH_SCRIPT)
        trace = self.path("torch-nvtx.db")
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, script], capture_output=True, text=True,
                                timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        db = sqlite3.connect(trace)
        steps = db.execute("SELECT count(*), sum(end_ns IS NOT NULL) FROM ranges r JOIN strings s ON s.id = r.name_id "
                           "WHERE s.text = 'train step'").fetchone()
        marks = db.execute("SELECT count(*) FROM marks m JOIN strings s ON s.id = m.name_id "
                           "WHERE s.text = 'done'").fetchone()[0]
        db.close()
        self.assertEqual(steps, (5, 5))
        self.assertEqual(marks, 1)
        print("FIGURE torch.cuda.nvtx: 5 'train step' ranges and 1 mark captured")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
