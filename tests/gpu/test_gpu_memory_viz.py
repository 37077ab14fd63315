"""`report --format memory-viz` of a real PyTorch program on the GPU (samples/torch_fragmenting.py, default allocator
and expandable segments): PyTorch's own torch.cuda._memory_viz reads the snapshot (trace_plot, segment_plot, segsum,
trace, memory, segments: tests/html/memory_viz_check.py), and its segments agree with PyTorch's own statistics at the
end, which the sample prints: reserved = the bytes of PyTorch's segments, allocated = the bytes of their live blocks
at PyTorch's own block sizes (given by the replay of its allocator: the export must say "replayed"), requested = what
those blocks asked for; per device, alloc minus free_completed bytes are what the report says the app held. Prints
FIGURE lines.
Exits 77 without a GPU or PyTorch."""
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, report_json  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SAMPLE = os.path.join(SOURCE, "samples", "torch_fragmenting.py")
CHECK = os.path.join(HERE, "..", "html", "memory_viz_check.py")


class GpuMemoryVizTest(TraceDirTestCase):
    figures = []

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def check(self, name, alloc_conf):
        trace = self.path(f"{name}.db")
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, SAMPLE], capture_output=True, text=True,
                                timeout=600, env=dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=alloc_conf))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        torch_says = dict(re.findall(r"(reserved|allocated|requested)=(\d+)", result.stdout))
        snap = self.path(f"{name}.pickle")
        result = subprocess.run([CLI, "report", "--format", "memory-viz", "-o", snap, trace], capture_output=True,
                                text=True, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("memory-viz:", result.stderr)  # no line saying the blocks keep their requested sizes
        with open(snap, "rb") as f:
            snapshot = pickle.load(f)
        self.assertEqual((snapshot["gpumemtrace"]["block_sizes"], snapshot["gpumemtrace"]["block_sizes_note"]),
                         ("replayed", ""))
        torch_segments = [s for s in snapshot["segments"] if s["segment_type"] in ("small", "large")]
        reserved = sum(s["total_size"] for s in torch_segments)
        allocated = sum(s["allocated_size"] for s in torch_segments)
        self.assertEqual(reserved, int(torch_says["reserved"]))
        self.assertEqual(allocated, int(torch_says["allocated"]))
        requested = sum(b["requested_size"] for s in torch_segments for b in s["blocks"]
                        if b["state"] == "active_allocated")
        self.assertEqual(requested, int(torch_says["requested"]))
        for segment in snapshot["segments"]:
            self.assertEqual(sum(b["size"] for b in segment["blocks"]), segment["total_size"])
        live = 0
        for entries in snapshot["device_traces"]:
            for entry in entries:
                live += entry["size"] if entry["action"] == "alloc" else 0
                live -= entry["size"] if entry["action"] == "free_completed" else 0
        dropped = sum(snapshot["gpumemtrace"]["entries_dropped"].values())
        if dropped == 0:
            self.assertEqual(live, report_json(trace)["totals"]["leaked_bytes"])
        checked = subprocess.run([PYTHON, CHECK, snap], capture_output=True, text=True, timeout=600)
        self.assertEqual(checked.returncode, 0, checked.stderr[-3000:])
        verdict = json.loads(checked.stdout.splitlines()[-1])
        self.assertTrue(verdict["trace_plot_has_viewer"])
        self.assertEqual(sum(verdict["calc_active"]), sum(s["allocated_size"] for s in snapshot["segments"]))
        self.figures.append(f"memory_viz {name}: {len(snapshot['segments'])} segments ({len(torch_segments)} "
                            f"PyTorch's), reserved {reserved} = torch's, allocated {allocated} = torch's, "
                            f"requested {requested} = torch's, {sum(len(t) for t in snapshot['device_traces'])} "
                            f"actions, {dropped} cut, pickle {os.path.getsize(snap)} B")

    def test_default_allocator(self):
        self.check("default", "")

    def test_expandable_segments(self):
        self.check("expandable", "expandable_segments:True")


if __name__ == "__main__":
    if not have_gpu() or not have_torch_cuda(PYTHON):
        print("SKIP: needs a GPU and a PyTorch that sees it", file=sys.stderr)
        sys.exit(SKIP)
    unittest.main()
