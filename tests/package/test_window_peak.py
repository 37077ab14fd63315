"""A test's peak where PyTorch's blocks are recorded (gpumemtrace.windows.window_peak), on the events of the GPU
session of tests/gpu/torch_session as recorded on an H100 (2026-12-06, 21268ac): test 2's `int(scratch.sum())` of
8 MiB of uint8 made a 64 MiB int64 temporary, whose segment PyTorch kept cached; test 3's 64 MiB tensor reused that
segment. `report`'s own peak for test 3's window is the device's, 0 (nothing new reserved); the test's peak is its
tensor's 64 MiB. The trace is a real one (`run --simulate` of samples/leaky) with its events replaced by those,
read by this build's CLI."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ.get("GMT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GMT_BUILD_DIR", "build")
CLI = os.environ.get("GMT_CLI", os.path.join(BUILD, "bin", "gpumemtrace"))
sys.path.insert(0, os.path.join(SOURCE, "package"))
from gpumemtrace.windows import window_peak  # noqa: E402

MiB = 1 << 20
ORIGIN = 105697626003  # the session's start_monotonic_ns
SEGMENT_1, SEGMENT_2, SMALL, SEGMENT_64 = 0x7fb8c0800000, 0x7fb8a0000000, 0x7fb89fa00000, 0x7fb8b8000000
CUDA_MALLOC, TORCH_SEGMENT, TORCH_BLOCK, TORCH_FREE = (1, 1, 3), (22, 47, 4), (1, 45, 4), (2, 46, 4)
# (ms since the start, (kind, api, source), size, address): the session's events as the H100 recorded them.
EVENTS = [
    (6121.763, CUDA_MALLOC, 16 * MiB, SEGMENT_1), (6121.919, TORCH_SEGMENT, 16 * MiB, SEGMENT_1),
    (6121.921, TORCH_BLOCK, 16 * MiB, SEGMENT_1),  # test 1 keeps its tensor
    (6975.678, CUDA_MALLOC, 20 * MiB, SEGMENT_2), (6975.688, TORCH_SEGMENT, 20 * MiB, SEGMENT_2),
    (6975.691, TORCH_BLOCK, 8 * MiB, SEGMENT_2),  # test 2: torch.ones(8 MiB)
    (6995.333, CUDA_MALLOC, 2 * MiB, SMALL), (6995.347, TORCH_SEGMENT, 2 * MiB, SMALL),
    (6995.350, TORCH_BLOCK, 512, SMALL),
    (6995.853, CUDA_MALLOC, 64 * MiB, SEGMENT_64), (6995.859, TORCH_SEGMENT, 64 * MiB, SEGMENT_64),
    (6995.873, TORCH_BLOCK, 64 * MiB, SEGMENT_64),  # the sum's int64 temporary
    (7068.192, TORCH_FREE, 0, SEGMENT_64), (7068.199, TORCH_FREE, 0, SMALL),
    (7070.143, TORCH_FREE, 0, SEGMENT_2),
    (7932.550, TORCH_BLOCK, 64 * MiB, SEGMENT_64), (7932.601, TORCH_FREE, 0, SEGMENT_64),  # test 3, in the cache
]
TEST_2 = (6.974042, 7.931541)
TEST_3 = (7.931649, 8.802030)


def make_trace(path, tensor_blocks):
    subprocess.run([CLI, "run", "--simulate", "-o", path, "--", os.path.join(BUILD, "samples", "leaky")],
                   check=True, capture_output=True)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM event_rows")
    for number, (ms, (kind, api, source), size, address) in enumerate(EVENTS, 1):
        if not tensor_blocks and source == 4:
            continue
        db.execute("INSERT INTO events(id, time_ns, kind, api, source, memory_kind, thread_id, device, stream, address,"
                   " size, stack_id, error, handle, context) VALUES (?, ?, ?, ?, ?, 1, 1, 0, 0, ?, ?, 0, 0, 0, 0)",
                   (number, ORIGIN + round(ms * 1e6), kind, api, source, address, size))
    db.execute("UPDATE meta SET value = ? WHERE key = 'start_monotonic_ns'", (str(ORIGIN),))
    db.execute("UPDATE meta SET value = ? WHERE key = 'end_monotonic_ns'", (str(ORIGIN + 9 * 10**9),))
    if tensor_blocks:
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('tensor_blocks', '1')")
    db.commit()
    db.close()


def window_report(path, since, until):
    # As the plugin asks: the window's report, which exits 0 also when nothing was allocated in it.
    result = subprocess.run([CLI, "report", "--format", "json", "--top", "3", "--since", f"{since:.9f}",
                             "--until", f"{until:.9f}", path], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


class WindowPeakTest(unittest.TestCase):
    def test_a_tensor_in_a_cached_segment_is_the_tests_peak(self):
        with tempfile.TemporaryDirectory(prefix="gmt-window-peak-") as folder:
            trace = os.path.join(folder, "session.db")
            make_trace(trace, tensor_blocks=True)
            test_3 = window_report(trace, *TEST_3)
            self.assertEqual(test_3["totals"]["peak_bytes"], 0)  # the device's: nothing new reserved
            peak, stacks = window_peak(test_3)
            self.assertEqual(peak, 64 * MiB)
            self.assertEqual([(s["bytes"], s["count"]) for p in stacks for s in p["stacks"]], [(64 * MiB, 1)])
            # Test 2: its tensors at once (8 MiB, the 512 B block and the 64 MiB temporary), not the segments behind
            # them (20 + 2 + 64 MiB, the device's peak).
            test_2 = window_report(trace, *TEST_2)
            self.assertEqual(test_2["totals"]["peak_bytes"], 86 * MiB)
            self.assertEqual(window_peak(test_2)[0], 72 * MiB + 512)

    def test_without_tensor_blocks_the_peak_is_the_cuda_level(self):
        with tempfile.TemporaryDirectory(prefix="gmt-window-peak-") as folder:
            trace = os.path.join(folder, "session.db")
            make_trace(trace, tensor_blocks=False)
            test_2 = window_report(trace, *TEST_2)
            peak, stacks = window_peak(test_2)
            self.assertEqual(peak, 86 * MiB)
            self.assertEqual(sum(s["bytes"] for p in stacks for s in p["stacks"]), 86 * MiB)


if __name__ == "__main__":
    unittest.main()
