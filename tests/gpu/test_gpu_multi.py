"""Multi-GPU: a torchrun job of two processes on two GPUs, each wrapped by `gpumemtrace run -o trace.%r.db`,
doing NCCL all-reduces; rank 1 leaks on purpose (samples/torch_ddp_leak.py). The merged report must name
rank 1 as the outlier, give per-device figures on devices 0 and 1, and attribute bytes to NCCL.
Skips (exit 77) with fewer than two GPUs or without PyTorch (with CUDA and NCCL)."""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import CLI, TraceDirTestCase, run_cli  # noqa: E402

SKIP = 77
PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SCRIPT = os.path.join(os.environ.get("GMT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                      "samples", "torch_ddp_leak.py")
STEPS, KEEP_BYTES = 20, 64 << 20


def gpu_count():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    result = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return len([line for line in result.stdout.splitlines() if line.startswith("GPU ")]) if result.returncode == 0 else 0


def torch_ready():
    check = ("import torch, torch.distributed as d; "
             "assert torch.cuda.device_count() >= 2 and d.is_available() and d.is_nccl_available()")
    return subprocess.run([PYTHON, "-c", check], capture_output=True).returncode == 0


class TorchDdpTest(TraceDirTestCase):
    figures = []

    def test_torchrun_two_ranks_nccl_merged_report(self):
        env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", GMT_LEAK_RANK="1")
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        command = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "--no-python",
                   CLI, "run", "-q", "-o", self.path("trace.%r.db"), "--", PYTHON, SCRIPT]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        self.assertEqual(result.returncode, 0, result.stdout[-3000:] + result.stderr[-3000:])
        traces = [self.path("trace.0.db"), self.path("trace.1.db")]
        for trace in traces:
            self.assertTrue(os.path.exists(trace), os.listdir(self.dir))

        report = run_cli("report", "--format", "json", *traces)
        self.assertEqual(report.returncode, 0, report.stderr)
        merged = json.loads(report.stdout)
        print(run_cli("report", *traces).stdout)
        processes = merged["processes"]
        self.assertEqual([p["rank"] for p in processes], ["0", "1"])
        for p in processes:
            rank = int(p["rank"])
            self.assertEqual((p["rank_source"], p["local_rank"], p["world_size"]), ("RANK", str(rank), "2"))
            self.assertTrue(p["complete"])
            self.assertFalse(p["simulated"])
            self.assertIn(rank, p["devices"])  # each rank ran on the GPU of its local rank
            own = [d for d in p["per_device"] if d["device"] == rank]
            self.assertEqual(len(own), 1, p["per_device"])
            self.assertGreater(own[0]["peak_bytes"], 0)
            # NCCL's own buffers (communicator, channels) are attributed from the stack's module.
            self.assertGreater(p["nccl_bytes_at_peak"], 0, p)
            self.assertGreater(own[0]["nccl_bytes_at_peak"], 0, p)
        self.assertEqual({d["device"] for p in processes for d in p["per_device"]}, {0, 1})

        # Rank 1 kept 20 x 64 MiB: about that much more is leaked than on rank 0 (what else the caching
        # allocator keeps may differ a little between ranks), and it is the outlier.
        leaked = {p["rank"]: p["leaked_bytes"] for p in processes}
        self.assertGreaterEqual(leaked["1"] - leaked["0"], STEPS * KEEP_BYTES * 9 // 10, leaked)
        named = {(o["rank"], o["measure"]) for o in merged["outliers"]}
        self.assertIn(("1", "leaked"), named, merged["outliers"])
        self.assertNotIn("0", {rank for rank, _ in named})
        top = merged["leaks"][0]
        self.assertEqual([p["rank"] for p in top["processes"]], ["1"])
        # Exactly the kept tensors that PyTorch got fresh segments for (cudaMalloc, 64 MiB each): the sample counts
        # them, since a kept tensor served from a block freed earlier would show under that segment's stack.
        fresh = int(re.search(r"kept tensors in fresh segments: (\d+)", result.stdout).group(1))
        self.assertGreaterEqual(fresh, STEPS // 2, result.stdout[-2000:])
        self.assertEqual((top["bytes"], top["count"]), (fresh * KEEP_BYTES, fresh))
        self.check_imported_memory(traces, processes)
        self.figures.append(
            "torchrun 2 ranks NCCL: " + "; ".join(
                f"rank {p['rank']} devices {p['devices']} peak {p['peak_bytes']} B leaked {p['leaked_bytes']} B "
                f"NCCL at peak {p['nccl_bytes_at_peak']} B" for p in processes) +
            f"; outliers {sorted(named)}")

    def check_imported_memory(self, traces, processes):
        """NCCL maps its peer's buffers (IPC handles, or shareable VMM handles with cuMemImportFromShareableHandle):
        printed per rank, and never counted as the rank's own memory. No fixed figure: NCCL decides how much."""
        for trace, p in zip(traces, processes):
            report = json.loads(run_cli("report", "--format", "json", trace).stdout)
            imported = report["imported"]
            self.assertEqual(imported["peak_bytes"], p["imported"]["peak_bytes"])
            per_device = ", ".join(f"device {d['device']}: peak {d['peak_bytes']} B, {d['opens']} opens, "
                                   f"{d['open_at_end_bytes']} B open at the end" for d in imported["devices"])
            print(f"rank {p['rank']}: imported {imported['opens']} opened, {imported['closes']} closed, "
                  f"peak {imported['peak_bytes']} B ({per_device or 'none'}); "
                  f"{imported['left_open_handles']} handles left open", flush=True)
            self.figures.append(f"rank {p['rank']} imported peak {imported['peak_bytes']} B ({per_device or 'none'})")
            # The rank's own totals are its own allocations only: every Alloc except the imported ones, plus
            # physical VMM memory it created. Mapped imported handles are never VmmPhysical of this rank.
            db = sqlite3.connect(trace)
            own_bytes = db.execute("SELECT coalesce(sum(size), 0) FROM events WHERE (kind = 1 AND memory_kind != 5) "
                                   "OR kind = 12").fetchone()[0]
            imported_events = db.execute("SELECT count(*) FROM events WHERE memory_kind = 5").fetchone()[0]
            db.close()
            self.assertEqual(report["totals"]["allocated_bytes"], own_bytes, p["rank"])
            for leak in report["leaks"]:
                self.assertNotIn("ipc_imported", leak["memory_kinds"], leak)
            for series in report["timeline"]["series"]:
                self.assertNotEqual(series["memory_kind"], "ipc_imported")
            if imported_events:
                self.assertGreater(imported["opens"], 0, p["rank"])

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)


if __name__ == "__main__":
    if gpu_count() < 2:
        print("SKIP: fewer than two NVIDIA GPUs here; runs on a 2-GPU H200 machine via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    if not torch_ready():
        print("SKIP: no PyTorch with CUDA and NCCL (and two GPUs) for", PYTHON)
        sys.exit(SKIP)
    unittest.main(verbosity=2)
