"""The stack memo (recorder/stacks.h) against the full walk, on the GPU with the real PyTorch: every PyTorch program
of the suite runs under GMT_UNWIND=check, which takes every stack the memo answers in full as well and counts the
answers that differ (meta stack_memo_checked, stack_memo_mismatches), while both walkers are compared on every
stack (stack_walk_mismatches). A differing answer is a different stack, so 0 differences means the same user frame,
Python line and via chain on every checked event. The programs with a loop run long enough for at least 10,000
checked events; the others as they are (torch_oom allocates twice: nothing to answer from the memo). PyTorch's autograd worker threads (backward on the GPU, no Python frames)
take their stacks through the memo too. Prints FIGURE lines for docs/gpu-results.md. Exits 77 without a GPU or
PyTorch."""
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SAMPLES = os.path.join(SOURCE, "samples")
STEP_BENCH = os.path.join(SOURCE, "bench", "torch_step.py")
CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gmt-gpu-torch-bridge-cache")
MIN_CHECKED = 10_000
# GMT_STACK_CUT=1 in the suite's environment runs every program with the cut (a kept walk checked only up to CPython's
# eval loop, recorder/stacks.cpp): the check mode then still takes every memo answer in full and compares.
CUT_ON = os.environ.get("GMT_STACK_CUT") == "1"

# (name, command after the interpreter, whether it must reach MIN_CHECKED checked events)
PROGRAMS = [
    ("torch_training_leak", [os.path.join(SAMPLES, "torch_training_leak.py"), "--steps", "1500"], True),
    ("torch_dict_leak", [os.path.join(SAMPLES, "torch_dict_leak.py"), "--requests", "3000"], True),
    ("torch_step (train and inference)", [STEP_BENCH, "--worker", "--steps", "12", "--batch", "16"], True),
    ("torch_fragmenting", [os.path.join(SAMPLES, "torch_fragmenting.py")], False),
    ("torch_leak", [os.path.join(SAMPLES, "torch_leak.py")], False),
    ("torch_oom", [os.path.join(SAMPLES, "torch_oom.py")], False),
    ("torch_graph", [os.path.join(SAMPLES, "torch_graph.py")], False),
]


class GpuStackMemoTest(TraceDirTestCase):
    figures = []

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def test_every_memo_answer_is_the_full_stack(self):
        for name, command, long_enough in PROGRAMS:
            with self.subTest(program=name):
                trace = self.path(f"{name.split()[0]}.db")
                result = subprocess.run([CLI, "run", "-q", "-o", trace, "--", PYTHON, *command], capture_output=True,
                                        text=True, timeout=900,
                                        env=dict(os.environ, GMT_UNWIND="check", GMT_TORCH_BRIDGE_CACHE=CACHE))
                self.assertEqual(result.returncode, 0, result.stderr[-3000:])
                with sqlite3.connect(trace) as db:
                    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                    blocks = db.execute("SELECT count(*) FROM events WHERE source = 4 AND stack_id != 0").fetchone()[0]
                checked = int(meta.get("stack_memo_checked", 0))
                self.assertEqual(meta.get("stack_memo_mismatches"), "0",
                                 f"{name}: memo answers that differ: {meta.get('stack_memo_mismatch_examples')}")
                self.assertEqual(meta.get("stack_walk_mismatches"), "0", name)
                self.assertEqual(meta.get("tensor_blocks"), "1", f"{name}: {result.stderr[-2000:]}")
                if long_enough:
                    self.assertGreaterEqual(checked, MIN_CHECKED, name)
                cut_answers = int(meta.get("stack_walks_to_the_cut", 0))
                if CUT_ON and long_enough:  # the cut must have answered, or this run showed nothing about it
                    self.assertGreater(cut_answers, 0, name)
                self.figures.append(f"stack memo check, {name}: {checked} memo answers checked against the full "
                                    f"walk, 0 differ; {meta.get('stack_walks_checked')} walks compared with "
                                    f"libunwind, 0 differ; {blocks} tensor events with a stack; "
                                    f"{cut_answers} walks answered to the cut (GMT_STACK_CUT={int(CUT_ON)})")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    if not have_torch_cuda(PYTHON):
        print("SKIP: no PyTorch with CUDA here")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
