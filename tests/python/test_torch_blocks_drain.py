"""The block-level mode's drain (python/gpumemtrace_inprocess/torch_blocks.py) without PyTorch or the native
library: a scripted ring as torch.cuda.memory._snapshot() returns it, and a recording stand-in for
gmt_record_tensor_blocks. Every entry is drained exactly once however the ring wraps between drains; an overrun
is counted; the period follows the allocation rate and the drain's cost."""
import collections
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from gpumemtrace_inprocess import torch_blocks  # noqa: E402


class Recorder:
    def __init__(self):
        self.blocks = []
        self.overruns = 0

    def __call__(self, blocks, count, frames, frame_count, strings, string_count, thread_id, overruns):
        self.overruns = overruns
        for i in range(count):
            b = blocks[i]
            stack = [(strings[frames[f].file].decode(), strings[frames[f].function].decode(), frames[f].line)
                     for f in range(b.first_frame, b.first_frame + b.frame_count)]
            self.blocks.append((b.address, b.is_free, b.size, b.device, tuple(stack)))
        return count


class DrainTest(unittest.TestCase):
    def setUp(self):
        self.ring = collections.deque(maxlen=64)
        self.time_us = 0
        self.record = Recorder()
        self.drain = torch_blocks.Drain(lambda: {"device_traces": [list(self.ring)]}, self.record, 64)

    def tensor(self, address, line):
        for action in ("alloc", "free_requested", "free_completed"):
            self.time_us += 1
            self.ring.append({"action": action, "addr": address, "size": 512, "stream": 0, "time_us": self.time_us,
                              "frames": [{"filename": "train.py", "name": "step", "line": line}]
                              if action == "alloc" else []})

    def test_every_entry_once_across_drains_of_a_wrapping_ring(self):
        for step in range(300):
            self.tensor(step, 10 + step % 3)
            if step % 13 == 12:  # 39 new entries per drain in a ring of 64: the tail is partly overwritten
                self.drain.drain()
        self.drain.drain()
        self.drain.drain()  # nothing new: nothing recorded twice
        allocs = [b for b in self.record.blocks if b[1] == 0]
        frees = [b for b in self.record.blocks if b[1] == 1]
        self.assertEqual([b[0] for b in allocs], list(range(300)))
        self.assertEqual([b[0] for b in frees], list(range(300)))  # free_completed only
        self.assertEqual(allocs[7][4], (("train.py", "step", 11),))
        self.assertEqual(frees[0][4], ())
        self.assertEqual(self.drain.overruns, 0)

    def test_an_overrun_is_counted_and_the_newest_entries_still_drained(self):
        self.tensor(0, 1)
        self.drain.drain()
        for step in range(1, 40):  # 117 entries in a ring of 64: the last drained entry is gone
            self.tensor(step, 1)
        self.drain.drain()
        self.assertEqual(self.drain.overruns, 1)
        self.assertEqual(self.record.overruns, 1)
        allocs = [b[0] for b in self.record.blocks if b[1] == 0]
        self.assertEqual(allocs[0], 0)
        self.assertEqual(allocs[1:], list(range(40 - 21, 40)))  # what the ring still held: 21 whole tensors

    def test_period_follows_the_rate_and_the_drain_cost(self):
        self.drain.last_new_entries = 0
        self.assertEqual(self.drain.period_after(1.0), torch_blocks.MAX_PERIOD_S)
        self.drain.last_new_entries = 160  # 160 entries/s, ring 64: a quarter fills in 0.1 s
        self.assertAlmostEqual(self.drain.period_after(1.0), 0.1)
        self.drain.last_new_entries = 100000
        self.assertEqual(self.drain.period_after(1.0), torch_blocks.MIN_PERIOD_S)
        self.drain.last_new_entries = 1  # a quiet app: the drain's cost decides
        self.drain.last_drain_s = 0.5
        self.assertAlmostEqual(self.drain.period_after(1.0), 10.0)  # 20 x 0.5 s, before the ring's quarter (16 s)
        self.drain.last_new_entries = 8  # the ring's quarter in 2 s: no loss wins over the cost
        self.assertAlmostEqual(self.drain.period_after(1.0), 2.0)


if __name__ == "__main__":
    unittest.main()
