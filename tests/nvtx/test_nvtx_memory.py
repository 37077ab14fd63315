"""The NVTX memory API (nvtx3/nvToolsExtMem.h) in the trace, schema v8: an allocator's heaps as segment_alloc /
segment_free and its regions as alloc / free of memory kind heap_block, source nvtx_memory. samples/nvtx_heap (a
bump allocator in one cudaMalloc'd arena) and tests/nvtx/nvtx_mem_odd (bad arguments, host memory) under the
simulated runtime, alone and chained behind a recording NVTX tool (tests/nvtx/recording_injection.cpp)."""
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, report_json, sample
from nvtx_support import NVTX_TEST_DIR, RECORDING_LIBRARY, read_recording, run_gmt, run_raw

HEAP_SAMPLE = sample("nvtx_heap")
ODD_PROGRAM = os.path.join(NVTX_TEST_DIR, "nvtx_mem_odd")

ALLOC, FREE, SEGMENT_ALLOC, SEGMENT_FREE = 1, 2, 22, 23
HEAP_REGISTER, HEAP_UNREGISTER, REGIONS_REGISTER, REGIONS_UNREGISTER, HEAP_RESET = 54, 55, 56, 57, 58
NVTX_MEMORY, HEAP_BLOCK = 5, 7
ARENA, SCRATCH = 1 << 20, 64 << 10

# What samples/nvtx_heap does, as events of source nvtx_memory, in order: (kind, api, heap, offset in that heap,
# size). heap "arena" or "scratch"; a free's size is 0; a heap's events have offset 0 and the heap's size.
EXPECTED_HEAP_EVENTS = [
    (SEGMENT_ALLOC, HEAP_REGISTER, "arena", 0, ARENA),
    (ALLOC, REGIONS_REGISTER, "arena", 0, 4096),          # a
    (ALLOC, REGIONS_REGISTER, "arena", 4096, 8192),       # b
    (ALLOC, REGIONS_REGISTER, "arena", 12288, 16384),     # c, with a handle
    (ALLOC, REGIONS_REGISTER, "arena", 28672, 32768),     # d
    (FREE, REGIONS_UNREGISTER, "arena", 0, 0),            # a, by pointer
    (FREE, REGIONS_UNREGISTER, "arena", 4096, 0),         # b resized: freed ...
    (ALLOC, REGIONS_REGISTER, "arena", 4096, 6144),       # ... and allocated again with its new size
    (FREE, REGIONS_UNREGISTER, "arena", 12288, 0),        # c, by its handle
    (FREE, HEAP_RESET, "arena", 4096, 0),                 # the reset frees b and d
    (FREE, HEAP_RESET, "arena", 28672, 0),
    (ALLOC, REGIONS_REGISTER, "arena", 0, 65536),         # e, kept at exit
    (ALLOC, REGIONS_REGISTER, "arena", 65536, 1000),      # f and g, one batch
    (ALLOC, REGIONS_REGISTER, "arena", 66560, 3000),
    (FREE, REGIONS_UNREGISTER, "arena", 65536, 0),
    (FREE, REGIONS_UNREGISTER, "arena", 66560, 0),
    (SEGMENT_ALLOC, HEAP_REGISTER, "scratch", 0, SCRATCH),
    (ALLOC, REGIONS_REGISTER, "scratch", 0, 512),
    (FREE, HEAP_UNREGISTER, "scratch", 0, 0),             # the unregister frees the region left in it ...
    (SEGMENT_FREE, HEAP_UNREGISTER, "scratch", 0, SCRATCH),  # ... then the heap
]


class Event:
    COLUMNS = "id, kind, api, source, memory_kind, device, stream, address, size, handle, stack_id, error"

    def __init__(self, row):
        (self.id, self.kind, self.api, self.source, self.memory_kind, self.device, self.stream, self.address,
         self.size, self.handle, self.stack_id, self.error) = row


def read_events(trace, where):
    with sqlite3.connect(trace) as db:
        return [Event(row) for row in db.execute(f"SELECT {Event.COLUMNS} FROM events WHERE {where} ORDER BY id")]


def stack_functions(trace, stack_id):
    """The stack's frames, innermost first: (function, file, line) from the symbols `run` wrote."""
    with sqlite3.connect(trace) as db:
        return db.execute("SELECT s.function, s.file, s.line FROM stack_frames f LEFT JOIN symbols s ON s.pc = f.pc "
                          "WHERE f.stack_id = ? ORDER BY f.level", (stack_id,)).fetchall()


def app_frame(trace, stack_id):
    """The first frame outside NVTX's own functions (nvtxMem*, when not inlined): the allocator's call site."""
    for function, file, line in stack_functions(trace, stack_id):
        if function and not function.startswith("nvtxMem"):
            return function, file, line
    return None, None, None


class HeapEventsMixin:
    """Checks shared by the plain and the chained run of samples/nvtx_heap."""

    def heap_events(self):
        return read_events(self.trace, f"source = {NVTX_MEMORY}")

    def bases(self):
        """Each heap's base address, from its segment_alloc (checked against the CUDA-level allocation)."""
        events = self.heap_events()
        heaps = [e for e in events if e.kind == SEGMENT_ALLOC]
        self.assertEqual([e.size for e in heaps], [ARENA, SCRATCH])
        return {"arena": heaps[0].address, "scratch": heaps[1].address}, {"arena": heaps[0].handle,
                                                                          "scratch": heaps[1].handle}

    def test_app_runs_unchanged(self):
        self.assertEqual(self.raw.returncode, 0, self.raw.stderr)
        self.assertEqual(self.traced.returncode, 0, self.traced.stderr)
        self.assertEqual(self.traced.stdout, self.raw.stdout)
        self.assertIn("heap truth: live_regions=1 live_region_bytes=65536 live_heaps=1 live_heap_bytes=1048576",
                      self.traced.stdout)

    def test_exact_events(self):
        bases, handles = self.bases()
        got = [(e.kind, e.api, e.address, e.size, e.handle) for e in self.heap_events()]
        expected = [(kind, api, bases[heap] + offset, size, handles[heap])
                    for kind, api, heap, offset, size in EXPECTED_HEAP_EVENTS]
        self.assertEqual(got, expected)

    def test_memory_kind_device_and_stream(self):
        for e in self.heap_events():
            with self.subTest(id=e.id):
                self.assertEqual((e.memory_kind, e.device, e.stream, e.error), (HEAP_BLOCK, 0, 0, 0))

    def test_heaps_lie_in_the_cuda_level_allocations(self):
        bases, _ = self.bases()
        cuda = read_events(self.trace, f"source != {NVTX_MEMORY}")
        allocs = {(e.address, e.size) for e in cuda if e.kind == ALLOC}
        frees = {e.address for e in cuda if e.kind == FREE}
        self.assertIn((bases["arena"], ARENA), allocs)
        self.assertIn((bases["scratch"], SCRATCH), allocs)
        self.assertIn(bases["scratch"], frees)  # the scratch arena is cudaFree'd ...
        self.assertNotIn(bases["arena"], frees)  # ... the pool's arena is kept until exit

    def test_region_stacks_name_the_register_call(self):
        region_line = marker_line("nvtx_heap.cu", "REGION-SITE")
        resize_line = marker_line("nvtx_heap.cu", "RESIZE-SITE")
        heap_line = marker_line("nvtx_heap.cu", "HEAP-SITE")
        keep_line = marker_line("nvtx_heap.cu", "KEEP-SITE")
        for e in self.heap_events():
            if e.kind in (FREE, SEGMENT_FREE):
                continue
            with self.subTest(id=e.id):
                self.assertNotEqual(e.stack_id, 0)
                function, file, line = app_frame(self.trace, e.stack_id)
                if e.kind == SEGMENT_ALLOC:
                    name, marker = "register_heap", heap_line
                elif e.size == 6144:
                    name, marker = "resize", resize_line
                elif e.size == 65536:  # e, the region kept at exit
                    name, marker = "keep_region", keep_line
                else:
                    name, marker = "hand_out", region_line
                self.assertIn(name, function)
                # NVTX's call is inlined into the caller at -O2: its pc is in NVTX's header's code, and the frame is
                # still the caller's, at the caller's own line (the inlined call site), the marked one.
                self.assertTrue(file.endswith("nvtx_heap.cu"), file)
                self.assertEqual(line, marker)

    def test_report_reads_the_trace(self):
        report_json(self.trace)  # a reader of schema v8 takes these events without complaint


class HeapSampleTest(HeapEventsMixin, TraceDirTestCase):
    """No other NVTX tool: heap handles are their base addresses, region handles their start addresses."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("heap.db")
        cls.raw = run_raw(HEAP_SAMPLE)
        cls.traced = run_gmt("run", "-q", "--simulate", "-o", cls.trace, "--", HEAP_SAMPLE)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_handles_are_the_base_addresses(self):
        bases, handles = self.bases()
        self.assertEqual(bases, handles)


class ChainedHeapSampleTest(HeapEventsMixin, TraceDirTestCase):
    """Behind another NVTX tool that hands out handles of its own: the tool receives every memory-API call with its
    own handles, the app gets the tool's handles, and the trace is the same but for the handle values."""

    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("chained.db")
        cls.record = cls.workdir.path("record.txt")
        cls.raw = run_raw(HEAP_SAMPLE)
        cls.traced = run_gmt("run", "-q", "--simulate", "-o", cls.trace, "--", HEAP_SAMPLE,
                             env={"NVTX_INJECTION64_PATH": RECORDING_LIBRARY, "GMT_TEST_NVTX_RECORD": cls.record})
        cls.lines = [f for f in read_recording(cls.record) if f[0].startswith("mem_")]

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def test_handles_are_the_tools(self):
        bases, handles = self.bases()
        self.assertNotEqual(handles["arena"], bases["arena"])
        self.assertNotEqual(handles["scratch"], bases["scratch"])

    def test_the_tool_receives_every_call_with_its_own_handles(self):
        d = "sample.heap"
        self.assertEqual(self.lines, [
            ("mem_heap_register", d, str(ARENA)),
            ("mem_regions_register", d, "known", "4096"),
            ("mem_regions_register", d, "known", "8192"),
            ("mem_regions_register", d, "known", "16384"),
            ("mem_regions_register", d, "known", "32768"),
            ("mem_regions_unregister", d, "pointer", "1", "0"),
            ("mem_regions_resize", d, "6144"),
            ("mem_regions_unregister", d, "handle", "1", "1"),  # c's handle: the tool's own
            ("mem_heap_reset", d, "known"),
            ("mem_regions_register", d, "known", "65536"),
            ("mem_regions_register", d, "known", "1000,3000"),
            ("mem_regions_unregister", d, "pointer", "2", "0"),
            ("mem_heap_register", d, str(SCRATCH)),
            ("mem_regions_register", d, "known", "512"),
            ("mem_heap_unregister", d, "known"),
        ])


class OddArgumentsTest(TraceDirTestCase):
    """Null descriptors, short structures, unknown and process-wide heaps, zero counts, regions outside their heap,
    a double unregister: the app runs as without us, and only the one real heap and its regions are recorded."""

    def check(self, env=None):
        trace = self.path("odd.db")
        raw = run_raw(ODD_PROGRAM)
        traced = run_gmt("run", "-q", "--simulate", "-o", trace, "--", ODD_PROGRAM, env=env)
        self.assertEqual(raw.returncode, 0, raw.stderr)
        self.assertEqual(traced.returncode, 0, traced.stderr)
        self.assertEqual(traced.stdout, raw.stdout)
        self.assertEqual(traced.stderr, "")
        events = read_events(trace, f"source = {NVTX_MEMORY}")
        self.assertEqual(len(events), 4, [(e.kind, e.api, e.size) for e in events])
        base = events[0].address
        self.assertEqual([(e.kind, e.api, e.address - base, e.size, e.handle) for e in events], [
            (SEGMENT_ALLOC, HEAP_REGISTER, 0, 8192, events[0].handle),
            (ALLOC, REGIONS_REGISTER, 1024, 64, events[0].handle),
            (FREE, REGIONS_UNREGISTER, 1024, 0, events[0].handle),  # once: the second unregister names nothing
            (ALLOC, REGIONS_REGISTER, 256, 100, events[0].handle),
        ])
        self.assertTrue(all(e.device == -1 and e.memory_kind == HEAP_BLOCK for e in events))  # host memory
        return trace

    def test_alone(self):
        self.check()

    def test_chained(self):
        record = self.path("record.txt")
        self.check({"NVTX_INJECTION64_PATH": RECORDING_LIBRARY, "GMT_TEST_NVTX_RECORD": record})
        lines = [f for f in read_recording(record) if f[0].startswith("mem_")]
        # Every call reaches the tool, bad ones included: 7 heap registrations (6 bad) and 8 region unregisters.
        self.assertEqual(sum(1 for f in lines if f[0] == "mem_heap_register"), 7)
        self.assertEqual(sum(1 for f in lines if f[0] == "mem_regions_unregister"), 8)


if __name__ == "__main__":
    unittest.main()
