"""NVTX on the GPU: the application's ranges are captured under the driver-level backends exactly as under the
simulated runtime, a PyTorch script's torch.cuda.nvtx ranges land in the trace, `report` attributes memory
to the ranges (memory by range, growth per repetition), and samples/nvtx_heap's NVTX memory-API heaps and regions
are the same events as under the simulated runtime, alone and chained. Skips without a GPU."""
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
# The recording NVTX tool of the chained memory-API test, where the e2e suites find it.
os.environ.setdefault("GMT_NVTX_TEST_DIR",
                      os.path.join(os.environ.get("GMT_BUILD_DIR", "build"), "tests", "nvtx"))
from gmt_e2e import CLI, TraceDirTestCase, marker_line, parse_truth, report_json, run_cli, sample  # noqa: E402
from nvtx_support import EXPECTED_MARKS, EXPECTED_RANGES, NVTX_SAMPLE, read_marks, read_ranges  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402
from test_nvtx_memory import HEAP_SAMPLE, HeapEventsMixin  # noqa: E402
from nvtx_support import RECORDING_LIBRARY, environment, read_recording, run_gmt  # noqa: E402

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

# Memory per range from PyTorch: the caching allocator asks cudaMalloc for a 64 MiB segment for the weights,
# at most once for the 4 MiB temporaries of "train step" (reused from its cache afterwards), and for a new
# 32 MiB segment in every "leak step" (each tensor is kept): 32 MiB of growth per repetition.
TORCH_RANGES_SCRIPT = """
import torch
torch.empty(1, device="cuda")  # the context and the small pool, outside every range
torch.cuda.nvtx.range_push("load weights")
weights = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.nvtx.range_pop()
for step in range(5):
    torch.cuda.nvtx.range_push("train step")
    x = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    del x
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
kept = []
for step in range(6):
    torch.cuda.nvtx.range_push("leak step")
    kept.append(torch.empty(32 << 20, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
"""

MiB = 1 << 20


def range_entry(report, name, domain=None):
    for entry in report["ranges"]["by_name"]:
        if entry["name"] == name and entry["domain"] == domain and not entry["none"]:
            return entry
    raise AssertionError(f"no range {name!r} in {[e['name'] for e in report['ranges']['by_name']]}")


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
                # Memory by range: each step's 1 MiB batch is made inside "load batch" (domain sample.io),
                # step 2's is never freed; the 4 KiB staging buffer inside the start/end range "async copy".
                load = range_entry(report, "load batch", "sample.io")
                self.assertEqual((load["repetitions"], load["allocations"], load["allocated_bytes"]), (4, 4, 4 * MiB))
                self.assertEqual((load["frees"], load["live_allocations"], load["live_bytes"]), (3, 1, MiB))
                copy = range_entry(report, "async copy")
                self.assertEqual((copy["allocations"], copy["allocated_bytes"], copy["frees"]), (1, 4096, 1))
                self.assertEqual(range_entry(report, "step")["repetitions"], 4)
                self.assertEqual(report["ranges"]["growth"], [])

    def test_range_steps_sample_growth_per_repetition(self):
        trace = self.path("range-steps.db")
        result = run_cli("run", "-o", trace, "--", sample("range_steps"))
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        leaky = range_entry(report, "leaky step")
        self.assertEqual((leaky["repetitions"], leaky["allocations"], leaky["allocated_bytes"]), (8, 8, 8 * MiB))
        steady = range_entry(report, "steady step")
        self.assertEqual((steady["allocations"], steady["allocated_bytes"], steady["frees"]), (16, 32 * MiB, 16))
        self.assertEqual([g["name"] for g in report["ranges"]["growth"]], ["leaky step"])
        finding = report["ranges"]["growth"][0]
        self.assertEqual(finding["live_bytes_at_end"], [(s + 1) * MiB for s in range(8)])
        self.assertEqual(finding["stacks"][0]["stack"][0]["line"],
                         marker_line("range_steps.cu", "LEAK-SITE: cache_step_result"))
        print(f"FIGURE range_steps on the GPU: 'leaky step' grows {finding['bytes_per_iteration']:.0f} B per repetition; "
              "'steady step' has no finding")

    def test_torch_nvtx_ranges(self):
        if not have_torch_cuda(PYTHON):
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

    def test_torch_memory_per_range(self):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        script = self.path("torch_ranges.py")
        with open(script, "w") as f:
            f.write(TORCH_RANGES_SCRIPT)
        trace = self.path("torch-ranges.db")
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, script], capture_output=True, text=True,
                                timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        report = report_json(trace)
        weights = range_entry(report, "load weights")
        self.assertEqual((weights["repetitions"], weights["allocations"], weights["allocated_bytes"]), (1, 1, 64 * MiB))
        self.assertEqual(weights["live_bytes"], 64 * MiB)  # the caching allocator keeps its segments to the end
        train = range_entry(report, "train step")
        self.assertEqual(train["repetitions"], 5)
        # At block level (PyTorch's tensors, recorded by default): the one 4 MiB tensor of each step, freed in it.
        self.assertEqual((train["allocations"], train["allocated_bytes"]), (5, 5 * 4 * MiB))
        leak = range_entry(report, "leak step")
        self.assertEqual((leak["repetitions"], leak["allocations"], leak["allocated_bytes"]), (6, 6, 6 * 32 * MiB))
        growth = {g["name"]: g for g in report["ranges"]["growth"]}
        self.assertEqual(sorted(growth), ["leak step"])
        self.assertEqual(growth["leak step"]["live_bytes_at_end"], [(s + 1) * 32 * MiB for s in range(6)])
        self.assertAlmostEqual(growth["leak step"]["bytes_per_iteration"], 32 * MiB, delta=1)
        in_leak = report_json(trace, "--range", "leak step")
        self.assertEqual(in_leak["totals"]["allocated_bytes"], 6 * 32 * MiB)
        print(f"FIGURE torch.cuda.nvtx memory per range: load weights {weights['allocated_bytes']} B, "
              f"train step {train['allocations']} tensors, leak step +32 MiB per repetition")


class GpuHeapTestBase(HeapEventsMixin, TraceDirTestCase):
    """samples/nvtx_heap on the GPU under one backend (and, with `chained`, behind the recording NVTX tool): the
    exact events, stacks and handles of the simulated runtime's test (tests/nvtx/test_nvtx_memory.py)."""
    backend = None
    chained = False

    @classmethod
    def setUpClass(cls):
        if cls.backend is None:
            raise unittest.SkipTest("base class")
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path(f"heap-{cls.backend}.db")
        cls.raw = subprocess.run([HEAP_SAMPLE], env=environment(), capture_output=True, text=True, timeout=120)
        env = None
        if cls.chained:
            cls.record = cls.workdir.path("record.txt")
            env = {"NVTX_INJECTION64_PATH": RECORDING_LIBRARY, "GMT_TEST_NVTX_RECORD": cls.record}
        cls.traced = run_gmt("run", "-q", "--backend", cls.backend, "-o", cls.trace, "--", HEAP_SAMPLE, env=env)

    @classmethod
    def tearDownClass(cls):
        if cls.backend is not None:
            cls.workdir.tearDown()

    def test_handles(self):
        bases, handles = self.bases()
        if self.chained:
            self.assertNotEqual(bases, handles)  # the tool's own handles
            lines = [f for f in read_recording(self.record) if f[0].startswith("mem_")]
            self.assertEqual(len(lines), 15)
        else:
            self.assertEqual(bases, handles)


class GpuHeapHooksTest(GpuHeapTestBase):
    backend = "hooks"


class GpuHeapCuptiTest(GpuHeapTestBase):
    backend = "cupti"


class GpuHeapChainedTest(GpuHeapTestBase):
    backend = "hooks"
    chained = True


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
