"""The fast stack walker (unwind/fast_unwind.h) inside real CUDA processes: with GMT_UNWIND=check every stack
is walked by it and by libunwind, and the two must agree on every one. Under each backend: the C++ samples
(a shared cudart; the stack_shapes plugin unloaded with dlclose and loaded again) and a PyTorch training loop
(libtorch, libpython and CUDA's libraries on the stack). Prints how many walks were checked and how many the
fast walker left to libunwind (FIGURE lines). Skips (77) without a GPU; the PyTorch case without PyTorch."""
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SAMPLES, TraceDirTestCase, parse_truth, run_cli, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

BACKENDS = ("runtime", "cupti", "hooks")
PLUGIN = os.path.join(SAMPLES, "libstack_shapes_plugin.so")
PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
CHECK = {"GMT_UNWIND": "check"}

TRAINING = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
for step in range(20):
    loss = model(x).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
torch.cuda.empty_cache()  # the next steps allocate anew: more allocations, more walks
for step in range(5):
    model(torch.randn(64 * (step + 1), 1024, device="cuda")).sum().item()
torch.cuda.synchronize()
print("done", flush=True)
"""


def meta_of(trace):
    with sqlite3.connect(trace) as db:
        return dict(db.execute("SELECT key, value FROM meta"))


def allocations_with_stacks(trace):
    with sqlite3.connect(trace) as db:
        return db.execute("SELECT COUNT(*) FROM events WHERE kind = 1 AND stack_id != 0").fetchone()[0]


class FastWalkAgreesWithLibunwindTest(TraceDirTestCase):
    def check_trace(self, trace, label):
        meta = meta_of(trace)
        checked, fallback = int(meta["stack_walks_checked"]), int(meta["stack_walks_libunwind"])
        stacked = allocations_with_stacks(trace)
        print(f"FIGURE unwind check {label}: {checked} walks compared, 0 expected to differ: "
              f"{meta['stack_walk_mismatches']} differ; {fallback} left to libunwind; {stacked} allocations "
              f"with a stack", flush=True)
        self.assertEqual(meta["stack_walk_mismatches"], "0", label)
        self.assertGreater(checked, 0, label)
        # Every allocation's stack was walked once (frees take none); a walk the fast walker refused counts in
        # `fallback` instead of `checked`.
        self.assertGreaterEqual(checked + fallback, stacked, label)
        return checked, fallback

    def test_c_samples_under_each_backend(self):
        for backend in BACKENDS:
            for name, args in (("leaky", ()), ("stack_shapes", (PLUGIN, "5"))):
                with self.subTest(backend=backend, sample=name):
                    trace = self.path(f"{name}-{backend}.db")
                    result = run_cli("run", "-q", "--backend", backend, "-o", trace, "--", sample(name), *args,
                                     env=CHECK)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertNotIn("differs from libunwind", result.stderr)
                    parse_truth(result.stdout)
                    checked, fallback = self.check_trace(trace, f"{name} {backend}")
                    # Our samples, libc and CUDA's libraries all carry unwind information: none refused.
                    self.assertEqual(fallback, 0, f"{name} {backend}")

    def test_pytorch_training_under_cupti_and_hooks(self):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        script = self.path("train.py")
        with open(script, "w") as f:
            f.write(TRAINING)
        # Once with PyTorch's caching allocator and once without it (every tensor a cudaMalloc from deep in
        # libtorch and the interpreter: hundreds of walks instead of a few segments).
        for backend, caching in (("cupti", True), ("hooks", True), ("cupti", False), ("hooks", False)):
            with self.subTest(backend=backend, caching=caching):
                trace = self.path(f"torch-{backend}-{caching}.db")
                env = dict(os.environ, **CHECK)
                if not caching:
                    env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
                result = subprocess.run([CLI, "run", "-q", "--backend", backend, "-o", trace, "--", PYTHON, script],
                                        capture_output=True, text=True, timeout=600, env=env)
                self.assertEqual(result.returncode, 0, result.stderr[-3000:])
                self.assertIn("done", result.stdout)
                self.assertNotIn("differs from libunwind", result.stderr)
                checked, _ = self.check_trace(trace, f"pytorch {backend}{'' if caching else ', no caching'}")
                if not caching:
                    self.assertGreater(checked, 100, "without the caching allocator every tensor is walked")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
