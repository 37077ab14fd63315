"""Every way a PyTorch process ends keeps what was recorded or refuses a verdict (issue 26, point 1), on the GPU:
a normal exit, os._exit (which skips atexit), a single-rank NCCL job that exits without destroying its process
group, and SIGKILL. The CPU side of each path is in tests/reliability/test_exit_paths.py (simulated runtime).
Exits 77 without a GPU or without PyTorch."""
import os
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, TraceDirTestCase, report_json, run_cli  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
KEPT = 4 << 20  # torch.empty(2**20) in float32
BURST = 2000

# One kept tensor of 4 MiB, then the ending given on the command line.
APP = f"""
BURST = {BURST}
import os, signal, sys
import torch
kept = torch.empty(2**20, device="cuda")  # KEPT
torch.cuda.synchronize()
how = sys.argv[1]
if how == "nccl":
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="1")
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("allreduce", float(t[0]), flush=True)
    os._exit(0)  # no destroy_process_group: NCCL's communicator is torn down by the exit
if how == "nccl_teardown":  # a normal exit: NCCL's communicator and PyTorch's state torn down by the interpreter
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29534", RANK="0", WORLD_SIZE="1")
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    t = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(t)
    torch.cuda.synchronize()
    print("allreduce", float(t[0]), flush=True)
    dist.destroy_process_group()
    sys.exit(0)
if how == "abort":  # a burst of tensors right before a fatal signal: the 2 s flush must get them all out
    burst = [torch.empty(256 + i, dtype=torch.uint8, device="cuda") for i in range(BURST)]
    print("aborting", flush=True)
    os.abort()
if how == "os_exit":
    print("exiting", flush=True)
    os._exit(3)
if how == "sigkill":
    os.kill(os.getpid(), signal.SIGKILL)
print("normal", flush=True)
"""


class GpuTorchExitPathsTest(TraceDirTestCase):
    figures = []

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def run_app(self, how):
        script = self.path("app.py")
        with open(script, "w") as f:
            f.write(APP)
        trace = self.path(f"{how}.db")
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, script, how], capture_output=True, text=True,
                                timeout=600)
        return trace, result

    def kept_tensor(self, report):
        """The 4 MiB tensor, leaked at the KEPT line of the app (a tensor block of PyTorch's allocator)."""
        # (the NCCL case keeps its all-reduce buffer too, of the same size, at its own line)
        line = APP.splitlines().index(next(l for l in APP.splitlines() if "# KEPT" in l)) + 1
        kept = [leak for leak in report["leaks"] if (leak["python_line"] or "").endswith(f":<module>:{line}")]
        self.assertEqual([(leak["bytes"], leak["memory_kinds"]) for leak in kept], [(KEPT, ["tensor_block"])],
                         [(leak["bytes"], leak["memory_kinds"], leak["python_line"]) for leak in report["leaks"]])
        return kept[0]

    def check_complete_exit(self, how, code):
        trace, result = self.run_app(how)
        self.assertEqual(result.returncode, code, result.stderr[-3000:])
        report = report_json(trace)
        self.assertTrue(report["trace"]["complete"], report["trace"])
        self.assertEqual(report["trace"]["app_exit_status"], code)
        self.kept_tensor(report)
        gate = run_cli("report", "--fail-on-leak", "-o", os.devnull, trace)
        self.assertEqual(gate.returncode, 1, gate.stderr)  # the kept tensor is a leak, and the trace can say so
        self.figures.append(f"torch exit by {how}: exit code {code}, trace complete, the 4 MiB tensor leaked at its "
                            f"line, {report['totals']['allocations']} allocations; "
                            f"{self.after_close(report)}")
        return report, result

    def after_close(self, report):
        """What reached our hooks after the trace was closed (a library finalized after ours): the figure of
        docs/reliability.md's "Libraries that use CUDA in their constructors and destructors"."""
        trace = report["trace"]
        self.assertIsNotNone(trace["events_after_close"], trace)  # `run` started it: its counters are known
        self.assertEqual(trace["supports_verdict"], trace["frees_after_close"] == 0 and trace["complete"], trace)
        return (f"{trace['events_after_close']} events after the trace was closed "
                f"({trace['frees_after_close']} frees)")

    def test_normal_exit(self):
        self.check_complete_exit("normal", 0)

    def test_os_exit_skips_atexit_and_keeps_every_event(self):
        self.check_complete_exit("os_exit", 3)

    def test_single_rank_nccl_exit_without_destroying_the_group(self):
        report, result = self.check_complete_exit("nccl", 0)
        self.assertIn("allreduce 1.0", result.stdout)

    def test_nccl_teardown_at_a_normal_exit(self):
        trace, result = self.run_app("nccl_teardown")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertIn("allreduce 1.0", result.stdout)
        report = report_json(trace, "--allow-incomplete")
        self.assertTrue(report["trace"]["complete"], report["trace"])
        self.kept_tensor(report)
        self.figures.append(f"torch + NCCL, destroy_process_group then a normal exit: trace complete; "
                            f"{self.after_close(report)}")

    def test_abort_right_after_a_burst_keeps_every_event(self):
        """The fatal-signal flush (at most 2 s, recorder/fatal_signals.cpp) after BURST tensors made just before
        os.abort(): every event reaches the trace (events_lost_at_exit 0), which is incomplete (no verdict)."""
        trace, result = self.run_app("abort")
        self.assertEqual(result.returncode, 128 + 6, result.stderr[-3000:])
        report = report_json(trace, "--allow-incomplete")
        self.assertFalse(report["trace"]["complete"])
        self.assertEqual(report["trace"]["app_exit_signal"], 6)
        self.assertEqual(report["trace"]["events_lost_at_exit"], 0, report["trace"])
        self.kept_tensor(report)
        line = APP.splitlines().index(next(l for l in APP.splitlines() if "burst = [" in l)) + 1
        burst = [leak for leak in report["leaks"] if (leak["python_line"] or "").endswith(f":{line}")]
        self.assertEqual(sum(leak["count"] for leak in burst), BURST, [(l["python_line"], l["count"]) for l in
                                                                       report["leaks"]])
        self.assertEqual(run_cli("report", "--fail-on-leak", "-o", os.devnull, trace).returncode, 4)
        self.figures.append(f"torch abort right after {BURST} tensors: exit {result.returncode}, trace incomplete "
                            f"(no verdict), events lost at exit {report['trace']['events_lost_at_exit']}, all "
                            f"{BURST} burst tensors in the trace")

    def test_sigkill_refuses_a_verdict(self):
        trace, result = self.run_app("sigkill")
        self.assertEqual(result.returncode, 128 + 9, result.stderr[-3000:])
        report = report_json(trace)
        self.assertFalse(report["trace"]["complete"])
        self.assertEqual(report["trace"]["app_exit_signal"], 9)
        text = run_cli("report", trace).stdout
        self.assertNotIn("No leaks", text)
        self.assertEqual(run_cli("report", "--fail-on-leak", "-o", os.devnull, trace).returncode, 4)
        self.figures.append(f"torch SIGKILL: trace incomplete, {report['totals']['allocations']} allocations kept, "
                            f"--fail-on-leak exits 4 (no verdict)")


if __name__ == "__main__":
    if not have_gpu() or not have_torch_cuda(PYTHON):
        print("SKIP: needs an NVIDIA GPU and PyTorch with CUDA; runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
