"""The GPU suite: CUDA graphs built by stream capture run under the profiler exactly as they run alone, in every
capture mode, with a shared and a static runtime, under each driver-level backend (recorder/capture_safety.h);
PyTorch's torch.cuda.graph too, with its native allocator and with backend:cudaMallocAsync (samples/torch_graph.py).
Skips (exit 77) without a GPU.

samples/graph_capture.cu checks its own results on the host (a checksum per launch); samples/capture_probe.cu
says which of the profiler's driver queries a global-mode capture forbids, and that relaxed mode makes each safe.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import (CLI, SOURCE, TraceDirTestCase, find_leak, marker_line, parse_truth,  # noqa: E402
                     report_json, run_cli, sample)
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")

MODES = ("global", "thread_local", "relaxed")
BACKENDS = ("hooks", "cupti")
PROGRAMS = ("graph_capture", "graph_capture_static")


class GpuGraphsTest(TraceDirTestCase):
    figures = []

    def test_relaxed_mode_makes_every_query_of_ours_safe_inside_a_capture(self):
        result = subprocess.run([sample("capture_probe")], capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        lines = re.findall(r"^probe (\S+) (\S+) plain=(\S+) relaxed=(\S+)$", result.stdout, re.M)
        self.assertEqual(len(lines), 18, result.stdout)  # 9 queries, each on two threads
        for query, thread, _, relaxed in lines:
            self.assertEqual(relaxed, "ok", f"{query} on the {thread} invalidates a capture even in relaxed mode")
        forbidden = sorted({f"{query} ({thread})" for query, thread, plain, _ in lines if plain != "ok"})
        self.figures.append("capture_probe: forbidden in a global-mode capture without relaxed mode: "
                            + (", ".join(forbidden) or "none"))

    def test_captured_graphs_run_as_they_run_alone(self):
        runs = 0
        for program in PROGRAMS:
            for mode in MODES:
                for extra in ([], ["--side-thread"]):
                    args = [sample(program), mode, "3", *extra]
                    alone = subprocess.run(args, capture_output=True, text=True, timeout=120)
                    self.assertEqual(alone.returncode, 0, f"{args} fails without the profiler: {alone.stderr}")
                    self.assertIn("checksum ok", alone.stdout)
                    for backend in BACKENDS:
                        with self.subTest(program=program, mode=mode, extra=extra, backend=backend):
                            trace = self.path(f"{program}-{mode}-{len(extra)}-{backend}.db")
                            profiled = run_cli("run", "--backend", backend, "-o", trace, "--", *args)
                            self.assertEqual(profiled.returncode, 0, profiled.stdout + profiled.stderr)
                            self.assertIn("checksum ok", profiled.stdout)
                            report = report_json(trace)
                            self.assertEqual(report["trace"]["backend"], backend)
                            self.assertEqual(report["totals"]["leaked_bytes"], 0)
                            runs += 1
        # --no-stacks once: the issue was first seen with it too.
        trace = self.path("nostacks.db")
        profiled = run_cli("run", "--no-stacks", "-o", trace, "--", sample("graph_capture"), "global", "3")
        self.assertEqual(profiled.returncode, 0, profiled.stdout + profiled.stderr)
        self.assertIn("checksum ok", profiled.stdout)
        self.figures.append(f"graph_capture: {runs + 1} profiled runs (shared and static cudart, global, "
                            f"thread-local and relaxed capture, with and without a side thread, hooks and cupti) "
                            f"give the same checksum and exit code as alone")

    def test_a_graph_that_keeps_its_allocation_leaks_it_at_the_capture_site(self):
        line = marker_line("graph_capture.cu", "LEAK-SITE: capture_big_allocation")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                trace = self.path(f"keep-{backend}.db")
                profiled = run_cli("run", "--backend", backend, "-o", trace, "--",
                                   sample("graph_capture"), "global", "1", "--keep")
                self.assertEqual(profiled.returncode, 0, profiled.stdout + profiled.stderr)
                truth = parse_truth(profiled.stdout)[0]
                report = report_json(trace)
                self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
                self.assertEqual(report["totals"]["leaked_allocations"], 1)
                leak = find_leak(report, "capture_big_allocation")
                self.assertEqual(leak["stack"][0]["line"], line)
        self.figures.append("graph_capture --keep: the kept 32 MiB is the one leak, at the capture line, under "
                            "hooks and cupti")

    def test_pytorch_graphs_run_as_they_run_alone(self):
        # torch.cuda.graph in the three capture modes, with the native allocator (the graph's private pool) and with
        # backend:cudaMallocAsync (the captured allocations are graph memory nodes): the app's output, to the bit,
        # and its exit code are the same under each backend as alone.
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        program = [PYTHON, os.path.join(SOURCE, "samples", "torch_graph.py")]
        for conf in ("", "backend:cudaMallocAsync"):
            env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
            alone = subprocess.run(program, capture_output=True, text=True, timeout=300, env=env)
            self.assertEqual(alone.returncode, 0, alone.stderr[-3000:])
            self.assertEqual(alone.stdout.count(" same\n"), 3, alone.stdout)
            for backend in BACKENDS:
                with self.subTest(conf=conf, backend=backend):
                    trace = self.path(f"torch-graph-{len(conf)}-{backend}.db")
                    profiled = subprocess.run([CLI, "run", "-q", "--backend", backend, "-o", trace, "--", *program],
                                              capture_output=True, text=True, timeout=300, env=env)
                    self.assertEqual(profiled.returncode, alone.returncode, profiled.stderr[-3000:])
                    self.assertEqual(profiled.stdout, alone.stdout)
                    report = report_json(trace)
                    self.assertTrue(report["trace"]["complete"])
                    self.assertEqual(report["trace"]["backend"], backend)
        self.figures.append("torch.cuda.graph in global, thread-local and relaxed capture, native allocator and "
                            "backend:cudaMallocAsync, under hooks and cupti: output to the bit and exit code as alone "
                            f"({alone.stdout.splitlines()[0]})")

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); the GPU suite runs on the H200 via "
              "scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
