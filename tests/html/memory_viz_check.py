"""Runs PyTorch's own reader of memory snapshots, torch.cuda._memory_viz, on a snapshot and prints what it made of it
as JSON. Run by tests/html/test_memory_viz.py with the Python of a virtualenv that has torch (scripts/install-torch-
venv.sh): `python memory_viz_check.py snap.pickle`.

trace_plot and segment_plot embed the snapshot in memory_viz's page; segsum walks every segment's blocks and raises
when they do not add up to the segment (its own accounting check); trace() replays every device's actions; memory()
and segments() write a flamegraph line per block (handed back as text here: no flamegraph.pl download)."""
import json
import pickle
import re
import sys
import time

started = time.monotonic()
from torch.cuda import _memory_viz as memory_viz  # noqa: E402

import_seconds = time.monotonic() - started

with open(sys.argv[1], "rb") as f:
    snapshot = pickle.load(f)

def as_text(lines):
    return lines

trace_page = memory_viz.trace_plot(snapshot)
segment_page = memory_viz.segment_plot(snapshot)
summary = memory_viz.segsum(snapshot)
replay = memory_viz.trace(snapshot)
memory_lines = memory_viz.memory(snapshot, format_flamegraph=as_text)
segment_lines = memory_viz.segments(snapshot, format_flamegraph=as_text)

# The bytes memory() attributes to live blocks, by its own flamegraph lines ("stream_0;active_allocated;... N").
active = sum(int(line.rsplit(" ", 1)[1]) for line in memory_lines.splitlines() if ";active_allocated;" in line)
# Of those, what the blocks hold beyond their requests (the rounding, an unsplit tail): "...;active_allocated;<gaps> N".
gaps = sum(int(line.rsplit(" ", 1)[1]) for line in memory_lines.splitlines() if ";active_allocated;<gaps> " in line)
print(json.dumps({
    "torch_import_seconds": round(import_seconds, 2),
    "trace_plot_chars": len(trace_page),
    "segment_plot_chars": len(segment_page),
    "trace_plot_has_viewer": "add_local_files" in trace_page,
    "segment_plot_kind": "Allocator State History" in segment_page,
    "segsum_total_allocated": [line for line in summary.splitlines() if line.startswith("total_allocated")],
    "segsum_segments": [line for line in summary.splitlines() if line.startswith("segments:")],
    # trace() ends each device's text without a newline: "TOTAL MEM: ...Device 1 ----".
    "trace_devices": [int(n) for n in re.findall(r"Device (\d+) -+", replay)],
    "memory_active_bytes": active,
    "memory_gaps_bytes": gaps,
    "segment_lines": len(segment_lines.splitlines()),
    "calc_active": [memory_viz.calc_active(segment) for segment in snapshot["segments"]],
}))
