"""PyTorch's own reader, torch.cuda._memory_viz, on our snapshots: trace_plot and segment_plot make their pages,
segsum's accounting check passes on every segment, trace() replays every device, and memory()'s bytes of live blocks
are the trace's live bytes. It runs in a virtualenv with torch from PyPI (scripts/install-torch-venv.sh, which
scripts/install-deps.sh runs; GMT_TORCH_PYTHON names another interpreter); without one it exits 77 (ctest: skipped)
and says how to install it."""
import json
import os
import subprocess
import sys
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample
from torch_shaped_trace import LIVE_AT_END, MIB, SEGMENTS_AT_END, make_replayable_torch_trace, make_torch_shaped_trace

DEFAULT_VENV = "/opt/gpumemtrace-torch-venv"
TORCH_PYTHON = os.environ.get("GMT_TORCH_PYTHON") or os.path.join(
    os.environ.get("GMT_TORCH_VENV", DEFAULT_VENV), "bin", "python")
CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory_viz_check.py")

if not os.access(TORCH_PYTHON, os.X_OK):
    print(f"SKIP: no Python with torch at {TORCH_PYTHON}: run scripts/install-torch-venv.sh (scripts/install-deps.sh "
          "does), or set GMT_TORCH_PYTHON", file=sys.stderr)
    sys.exit(77)


class MemoryVizTorchTest(TraceDirTestCase):
    def torch_reads(self, trace):
        snap = self.path("snap.pickle")
        result = run_cli("report", "--format", "memory-viz", "-o", snap, trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")}
        checked = subprocess.run([TORCH_PYTHON, CHECK, snap], capture_output=True, text=True, timeout=600, env=env)
        self.assertEqual(checked.returncode, 0, checked.stderr[-3000:])
        result = json.loads(checked.stdout.splitlines()[-1])
        self.assertTrue(result["trace_plot_has_viewer"])
        self.assertTrue(result["segment_plot_kind"])
        return result

    def test_plain_cuda_program(self):
        trace = self.path("leaky.db")
        self.assertEqual(run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("leaky")).returncode, 0)
        result = self.torch_reads(trace)
        report = report_json(trace, "--top", "1000")
        # What the app held on devices (pinned host memory, device -1, is left out of a per-device snapshot).
        on_devices = [leak for leak in report["leaks"] if leak["devices"] != [-1]]
        self.assertLess(len(on_devices), len(report["leaks"]))
        held = sum(leak["bytes"] for leak in on_devices)
        self.assertEqual(result["memory_active_bytes"], held)
        self.assertEqual(sum(result["calc_active"]), held)
        self.assertEqual(result["segsum_segments"], [f"segments: {sum(leak['count'] for leak in on_devices)}"])
        self.assertEqual(result["trace_devices"], [0])

    def test_nvtx_heap(self):
        trace = self.path("heap.db")
        self.assertEqual(run_cli("run", "-q", "--simulate", "-o", trace, "--", sample("nvtx_heap")).returncode, 0)
        result = self.torch_reads(trace)
        self.assertEqual(result["memory_active_bytes"], report_json(trace)["totals"]["leaked_bytes"])

    def test_torch_shaped_trace(self):
        trace = self.path("torch.db")
        make_torch_shaped_trace(trace)
        result = self.torch_reads(trace)
        self.assertEqual(result["memory_active_bytes"], sum(LIVE_AT_END.values()))
        self.assertEqual(sorted(result["calc_active"]), sorted(held for _, held, _ in SEGMENTS_AT_END.values()))
        self.assertEqual(result["trace_devices"], [0, 1])

    def test_replayed_block_sizes(self):
        trace = self.path("replayable.db")
        make_replayable_torch_trace(trace)
        result = self.torch_reads(trace)
        # Live blocks at PyTorch's sizes: 3 MiB and 17 MiB (handed out whole), 1024 B twice (the 4096 B block is
        # pending its streams: not allocated).
        self.assertEqual(sorted(result["calc_active"]), [2048, 20 * MIB])
        self.assertEqual(result["memory_active_bytes"], 20 * MIB + 2048)
        # memory() weighs each block by its request and shows the rest as "<gaps>": the tail and the rounding.
        self.assertEqual(result["memory_gaps_bytes"], (MIB - 100) + 24 + 324)
        self.assertEqual(result["segsum_segments"], ["segments: 2"])


if __name__ == "__main__":
    unittest.main()
