"""The GPU suite: the samples on a real NVIDIA GPU, with a shared cudart, against two references: the
program's own account of its leaks, and compute-sanitizer's leak check. Skips (exit 77) without a GPU.

Run by ctest (label gpu) with the environment of tests/gpu/CMakeLists.txt; scripts/gpu-suite.sh builds and
runs it on a bare GPU machine and collects the results.
"""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import (TraceDirTestCase, find_leak, marker_line, parse_truth, report_json,  # noqa: E402
                     run_cli, sample)

SKIP = 77


def have_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    return subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def have_torch_cuda(python):
    """Whether `python` imports a PyTorch that sees a CUDA device (the PyTorch cases skip without one)."""
    return subprocess.run([python, "-c", "import torch; assert torch.cuda.is_available()"],
                          capture_output=True).returncode == 0


def sanitizer_leaks(command):
    """(bytes, allocations) from compute-sanitizer --leak-check full, or None when it is not installed."""
    sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(sanitizer):
        return None
    result = subprocess.run([sanitizer, "--leak-check", "full", *command], capture_output=True, text=True,
                            timeout=600)
    match = re.search(r"LEAK SUMMARY: (\d+) bytes leaked in (\d+) allocations", result.stdout + result.stderr)
    if match:
        return int(match.group(1)), int(match.group(2))
    if "ERROR SUMMARY: 0 errors" in result.stdout + result.stderr:
        return 0, 0
    raise AssertionError("unexpected compute-sanitizer output:\n" + result.stdout[-3000:] + result.stderr[-3000:])


def all_leaks(report):
    """Leaked bytes and allocations of every kind. compute-sanitizer's leak check counts the same set: device,
    managed, stream-ordered and pinned host allocations (seen on the H200: cudaMallocHost is included)."""
    return report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]


class GpuSamplesTest(TraceDirTestCase):
    figures = []  # printed at the end, collected into docs/gpu-results.md by scripts/gpu-suite.sh

    def profile(self, name, *args):
        trace = self.path(f"{name}.db")
        result = run_cli("run", "-o", trace, "--", sample(name), *args)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("SIMULATED", result.stderr)
        report = report_json(trace)
        self.assertFalse(report["trace"]["simulated"])
        return result, report

    def test_leaky_matches_truth_and_compute_sanitizer(self):
        result, report = self.profile("leaky")
        truth = parse_truth(result.stdout)[0]
        totals = report["totals"]
        self.assertEqual(totals["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(totals["leaked_allocations"], truth["leaked_allocations"])
        self.assertEqual(totals["failed_allocations"], truth["failed_allocations"])
        for function in ("load_weights", "make_workspace", "stage_host_buffer", "async_scratch"):
            leak = find_leak(report, function)
            self.assertEqual(leak["stack"][0]["line"], marker_line("leaky.cu", f"LEAK-SITE: {function}"))
        sanitizer = sanitizer_leaks([sample("leaky")])
        if sanitizer is not None:
            self.assertEqual(all_leaks(report), sanitizer, "leaks (bytes, allocations): gpumemtrace vs compute-sanitizer")
        self.figures.append(f"leaky: leaked {totals['leaked_bytes']} B in {totals['leaked_allocations']} "
                            f"allocations, {totals['failed_allocations']} failed; compute-sanitizer {sanitizer}; "
                            f"program's own count ({truth['leaked_bytes']}, {truth['leaked_allocations']})")
        print(run_cli("report", "--top", "4", self.path("leaky.db")).stdout)

    def test_no_leaks_sample_has_no_leaks(self):
        _, report = self.profile("no_leaks")
        self.assertEqual(report["totals"]["leaked_allocations"], 0)
        self.assertEqual(report["totals"]["allocations"], 120)
        self.assertEqual(report["totals"]["frees"], 120)
        sanitizer = sanitizer_leaks([sample("no_leaks")])
        if sanitizer is not None:
            self.assertEqual(sanitizer, (0, 0))
        self.figures.append(f"no_leaks: 120 allocations, 120 frees, 0 leaks (compute-sanitizer {sanitizer})")

    def test_threaded_loses_no_event(self):
        threads, pairs = 8, 10000
        result, report = self.profile("threaded", str(threads), str(pairs))
        totals = report["totals"]
        self.assertEqual(totals["allocations"], threads * (pairs + 1))
        self.assertEqual(totals["frees"], threads * pairs)
        self.assertEqual(totals["leaked_bytes"], parse_truth(result.stdout)[0]["leaked_bytes"])
        sanitizer = sanitizer_leaks([sample("threaded"), str(threads), "100"])
        if sanitizer is not None:
            self.assertEqual(sanitizer, (totals["leaked_bytes"], threads))
        self.figures.append(f"threaded: {totals['allocations']} allocations, {totals['frees']} frees, "
                            f"{totals['leaked_allocations']} leaks, compute-sanitizer {sanitizer}")

    def test_fork_and_exec_children(self):
        for mode in ("fork", "exec"):
            with self.subTest(mode=mode):
                trace = self.path(f"{mode}.db")
                result = run_cli("run", "-o", trace, "--", sample("forking"), mode)
                self.assertEqual(result.returncode, 0, result.stderr)
                children = [f for f in os.listdir(self.dir) if f.startswith(f"{mode}.") and f != f"{mode}.db"
                            and f.endswith(".db")]
                self.assertEqual(len(children), 1, os.listdir(self.dir))
                parent = report_json(trace)
                child = report_json(self.path(children[0]))
                self.assertEqual(parent["totals"]["leaked_bytes"], 1 << 20)
                self.assertEqual(child["totals"]["leaked_bytes"], 2 << 20)
                find_leak(child, "child_work")
        self.figures.append("forking: parent and child traces exact for fork and fork+exec")

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
