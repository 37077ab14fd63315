"""PyTorch's FREE_REQUESTED as the recorder keeps it (recorder/framework_blocks.cpp): held until the device's next
action shows whether the block waited for other streams, and recorded before an allocator call such as
empty_cache(), which may complete the block inside it. Driven through the bridge's own entry points by
allocator_actions_app.py under the simulated runtime (no PyTorch); the GPU suite's allocator fuzz
(tests/gpu/test_gpu_whatif.py, 4d) makes the same sequence with the real PyTorch."""
import json
import os
import sqlite3
import sys
import unittest

from gmt_e2e import TraceDirTestCase, run_cli

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "allocator_actions_app.py")
BASE = 0x7F1000000000  # allocator_actions_app.py's concurrent blocks
BLOCKS = 5000
SMALL, LARGE, NEXT = 0x7F0000000000, 0x7F0010000000, 0x7F0020000000


class HeldFreeRequestTest(TraceDirTestCase):
    def record(self, name, *app_args):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sys.executable, APP, *app_args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("done True", result.stdout)
        return trace

    def events(self, trace):
        with sqlite3.connect(trace) as db:
            return db.execute("SELECT k.name, a.name, e.address, e.size, e.stream FROM events e "
                              "JOIN event_kinds k ON k.id = e.kind JOIN apis a ON a.id = e.api "
                              "ORDER BY e.id").fetchall()

    def test_a_request_held_across_empty_cache_is_recorded_before_the_call(self):
        events = [row[:4] for row in self.events(self.record("sequence.db", "sequence"))]
        self.assertEqual(events, [
            ("segment_alloc", "torch_segment_alloc", SMALL, 2 << 20),
            ("alloc", "torch_block_alloc", SMALL, 512),
            ("free", "torch_block_free", SMALL, 0),  # completed at once: its request is no event
            ("segment_alloc", "torch_segment_alloc", LARGE, 20 << 20),
            ("alloc", "torch_block_alloc", LARGE, 20 << 20),
            ("free_requested", "torch_block_free_requested", LARGE, 20 << 20),  # before the call that completes it
            ("allocator_call", "torch_empty_cache", 0, 0),
            ("free", "torch_block_free", LARGE, 0),
            ("segment_free", "torch_segment_free", LARGE, 20 << 20),
            ("segment_free", "torch_segment_free", SMALL, 2 << 20),
            ("segment_alloc", "torch_segment_alloc", NEXT, 20 << 20),
            ("alloc", "torch_block_alloc", NEXT, 20 << 20),
        ])

    def test_whatif_reproduces_a_block_completed_inside_empty_cache(self):
        trace = self.record("sequence.db", "sequence")
        result = run_cli("whatif", trace, "--alloc-conf", "", "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        check = json.loads(result.stdout)["self_check"]
        self.assertTrue(check["exact"], check["divergence"])
        self.assertEqual((check["segment_actions_matched"], check["addresses_matched"], check["unknown_frees"]),
                         (5, 3, 0))

    def test_a_call_beside_the_actions_records_each_request_once_with_its_own_fields(self):
        # Each block's request is a deferred one (another block's action follows it), recorded by whichever of the
        # action and the concurrent empty_cache() claims it; block BLOCKS + 1's requests complete at once and are
        # recorded only where a call came between the two.
        events = self.events(self.record("concurrent.db", "concurrent", str(BLOCKS)))
        requests = [(address, size, stream) for kind, _, address, size, stream in events
                    if kind == "free_requested" and address != BASE + (BLOCKS + 1) * 4096]
        self.assertEqual(sorted(requests), [(BASE + i * 4096, i * 512, i) for i in range(1, BLOCKS + 1)])
        calls = sum(1 for kind, *_ in events if kind == "allocator_call")
        self.assertGreater(calls, 0)
        # Every block's life in order, block BLOCKS + 1's many lives included: allocated, perhaps let go, completed;
        # never a request after its completion.
        state = {}
        for index, (kind, _, address, _, _) in enumerate(events):
            if kind == "alloc":
                self.assertNotIn(state.get(address), ("allocated", "requested"), f"event {index}: {address:#x}")
                state[address] = "allocated"
            elif kind == "free_requested":
                self.assertEqual(state.get(address), "allocated", f"event {index}: {address:#x}")
                state[address] = "requested"
            elif kind == "free":
                self.assertIn(state.get(address), ("allocated", "requested"), f"event {index}: {address:#x}")
                state[address] = "freed"


if __name__ == "__main__":
    unittest.main()
