"""The driver-level backends end to end without a GPU: driver_app against the fake driver and the fake CUPTI
(TEST FIXTURES, fake_cuda.cpp and fake_cupti.cpp), profiled with `run --backend hooks` (the driver entry-point
hooks) and `run --backend cupti` (CUPTI's driver callbacks). Both must record exactly the same events, pool samples,
failures and devices, each event with the stack of the app's function that made the call. What this cannot show is
how the real driver and the real CUPTI behave: tests/gpu does that on a GPU."""
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, run_cli

FAKE_DIR = os.environ.get("GMT_FAKE_DRIVER_DIR", "")
APP = os.path.join(FAKE_DIR, "driver_app")
FAKE_CUPTI = os.path.join(FAKE_DIR, "libcupti.so.13")

MIB = 1 << 20
GIB = 1 << 30
CTX0, CTX1 = 0x1000, 0x2000
STREAM = 0x77
POOL = 0x5000
DEFAULT_POOL = 0x4000

# (kind, api, memory kind, device, stream, address, size, error, handle, context, the app's function at level 0 or
# None for an event without a stack), in recording order.
EXPECTED_EVENTS = [
    ("alloc", "cuMemAlloc", "device", 0, 0, 0x200000000, MIB, 0, 0, CTX0, "device_alloc"),
    # Pitched: the granted size, pitch (1000 rounded up to 512) x rows.
    ("alloc", "cuMemAllocPitch", "device", 0, 0, 0x200100000, 1024 * 10, 0, 0, CTX0, "pitched_alloc"),
    ("alloc_failed", "cuMemAllocManaged", "managed", 0, 0, 0, 0, 1, 0, CTX0, "failed_managed_alloc"),
    ("alloc", "cuMemAllocManaged", "managed", 0, 0, 0x200102800, 65536, 0, 0, CTX0, "managed_alloc"),
    ("alloc_failed", "cuMemAlloc", "device", 0, 0, 0, 1 << 50, 2, 0, CTX0, "out_of_memory"),
    ("alloc", "cuMemAllocHost", "host_pinned", -1, 0, 0x100000000, 4096, 0, 0, CTX0, "pinned_alloc"),
    ("alloc", "cuMemHostAlloc", "host_pinned", -1, 0, 0x100001000, 8192, 0, 0, CTX0, "host_alloc"),
    ("alloc", "cuMemAlloc", "device", 1, 0, 0x300000000, 2 * MIB, 0, 0, CTX1, "device_alloc"),
    ("alloc", "cuMemAlloc", "device", 0, 0, 0x200112800, 3 * MIB, 0, 0, CTX0, "alloc_through_entry_point"),
    ("alloc", "cuMemAllocAsync", "device", 0, STREAM, 0x200412800, 256 << 10, 0, 0, CTX0, "async_alloc"),
    # The _ptsz twin is recorded as the plain call.
    ("alloc", "cuMemAllocAsync", "device", 0, STREAM, 0x200452800, 512 << 10, 0, 0, CTX0, "async_alloc"),
    # A pool's events name the pool in `address`, and the device its location names.
    ("pool_create", "cuMemPoolCreate", "none", 1, 0, POOL, 0, 0, 0, CTX0, "pool_create"),
    ("alloc", "cuMemAllocFromPoolAsync", "device", 0, STREAM, 0x300200000, MIB, 0, POOL, CTX0, "pool_alloc"),
    ("alloc", "cuMemAllocFromPoolAsync", "device", 0, STREAM, 0x300300000, MIB, 0, POOL, CTX0, "pool_alloc"),
    ("free", "cuMemFreeAsync", "device", 0, STREAM, 0x200412800, 0, 0, 0, CTX0, None),
    ("free", "cuMemFreeAsync", "device", 0, STREAM, 0x200452800, 0, 0, 0, CTX0, None),
    ("free", "cuMemFreeAsync", "device", 0, STREAM, 0x300200000, 0, 0, 0, CTX0, None),
    ("free", "cuMemFreeAsync", "device", 0, STREAM, 0x300300000, 0, 0, 0, CTX0, None),
    ("pool_trim", "cuMemPoolTrimTo", "none", 0, 0, POOL, 0, 0, 0, CTX0, "main"),
    ("pool_destroy", "cuMemPoolDestroy", "none", 0, 0, POOL, 0, 0, 0, CTX0, "main"),
    # Virtual memory: physical memory is a handle, on the device its properties name; the failed cuMemMap of a
    # released handle is not recorded.
    ("vmm_reserve", "cuMemAddressReserve", "none", 0, 0, 0x700000000, 8 * MIB, 0, 0, CTX0, "virtual_memory"),
    ("vmm_create", "cuMemCreate", "vmm_physical", 1, 0, 0, 2 * MIB, 0, 0x1000, CTX0, "virtual_memory"),
    ("vmm_map", "cuMemMap", "none", 0, 0, 0x700000000, 2 * MIB, 0, 0x1000, CTX0, "virtual_memory"),
    ("vmm_unmap", "cuMemUnmap", "none", 0, 0, 0x700000000, 2 * MIB, 0, 0, CTX0, "virtual_memory"),
    ("vmm_release", "cuMemRelease", "none", 0, 0, 0, 0, 0, 0x1000, CTX0, "virtual_memory"),
    ("vmm_address_free", "cuMemAddressFree", "none", 0, 0, 0x700000000, 8 * MIB, 0, 0, CTX0, "virtual_memory"),
    # Memory of other processes: both IPC open entry points are one api; the opened range's size and device come
    # from the driver; an imported handle is on the device its properties name.
    ("alloc", "cuIpcOpenMemHandle", "ipc_imported", 0, 0, 0x600000000, MIB, 0, 0, CTX0, "imported_memory"),
    ("alloc", "cuIpcOpenMemHandle", "ipc_imported", 0, 0, 0x600100000, MIB, 0, 0, CTX0, "imported_memory"),
    ("free", "cuIpcCloseMemHandle", "ipc_imported", 0, 0, 0x600000000, 0, 0, 0, CTX0, None),
    ("vmm_import", "cuMemImportFromShareableHandle", "ipc_imported", 1, 0, 0, 0, 0, 0x1001, CTX0, "imported_memory"),
    ("vmm_reserve", "cuMemAddressReserve", "none", 0, 0, 0x700800000, 2 * MIB, 0, 0, CTX0, "imported_memory"),
    ("vmm_map", "cuMemMap", "none", 0, 0, 0x700800000, 2 * MIB, 0, 0x1001, CTX0, "imported_memory"),
    ("vmm_unmap", "cuMemUnmap", "none", 0, 0, 0x700800000, 2 * MIB, 0, 0, CTX0, "imported_memory"),
    ("vmm_release", "cuMemRelease", "none", 0, 0, 0, 0, 0, 0x1001, CTX0, "imported_memory"),
    ("vmm_address_free", "cuMemAddressFree", "none", 0, 0, 0x700800000, 2 * MIB, 0, 0, CTX0, "imported_memory"),
    # Frees, before the real free; freeing null is no event.
    ("free", "cuMemFree", "device", 0, 0, 0x200000000, 0, 0, 0, CTX0, None),
    ("free", "cuMemFree", "device", 0, 0, 0x200112800, 0, 0, 0, CTX0, None),
    ("free", "cuMemFreeHost", "host_pinned", -1, 0, 0x100000000, 0, 0, 0, CTX0, None),
]

# The out-of-memory failure carries what cuMemGetInfo said right after it; the other failure nothing.
USED_BEFORE_OOM = MIB + 1024 * 10 + 65536
EXPECTED_FAILURES = [(None, None), (16 * GIB - USED_BEFORE_OOM, 16 * GIB)]

# (pool, device, reserved, used): after each stream-ordered allocation (the app pauses so that none is skipped
# for the 10 ms limit), and after the pool's creation and trim (always).
EXPECTED_POOL_SAMPLES = [
    (DEFAULT_POOL, 0, 32 * MIB, 256 << 10),
    (DEFAULT_POOL, 0, 32 * MIB, 768 << 10),
    (POOL, 1, 32 * MIB, 0),
    (POOL, 0, 32 * MIB, MIB),
    (POOL, 0, 32 * MIB, 2 * MIB),
    (POOL, 0, 32 * MIB, 0),
]

EXPECTED_DEVICES = [
    (0, "Fake GPU 0 (gpumemtrace test fixture)", "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", 16 * GIB, "0000:10:00.0"),
    (1, "Fake GPU 1 (gpumemtrace test fixture)", "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", 16 * GIB, "0000:11:00.0"),
]


@unittest.skipUnless(os.path.exists(APP), "the fake driver fixture is not built")
class DriverBackendsTest(TraceDirTestCase):
    def profile(self, backend):
        trace = self.path(f"{backend}.db")
        # The fake driver first on the search path: the app's RUNPATH comes after LD_LIBRARY_PATH, which names
        # the real driver's folder on a GPU machine (seen on the H200: the real cuMemAlloc_v2 answered 201).
        path = os.environ.get("LD_LIBRARY_PATH", "")
        result = run_cli("run", "-q", "--backend", backend, "-o", trace, "--", APP,
                         env={"GMT_CUPTI_LIBRARY": FAKE_CUPTI,
                              "LD_LIBRARY_PATH": FAKE_DIR + (":" + path if path else "")})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("driver_app: done", result.stdout)
        return sqlite3.connect(trace)

    def events(self, db):
        return db.execute(
            "SELECT k.name, a.name, m.name, e.device, e.stream, e.address, e.size, e.error, e.handle, e.context, "
            "  (SELECT s.function FROM stack_frames f JOIN symbols s ON s.pc = f.pc "
            "   WHERE f.stack_id = e.stack_id AND f.level = 0) "
            "FROM events e JOIN event_kinds k ON k.id = e.kind JOIN apis a ON a.id = e.api "
            "JOIN memory_kinds m ON m.id = e.memory_kind ORDER BY e.id").fetchall()

    def check_trace(self, db, backend, source):
        self.assertEqual(db.execute("SELECT value FROM meta WHERE key = 'backend'").fetchone(), (backend,))
        events = self.events(db)
        self.assertEqual(len(events), len(EXPECTED_EVENTS), "\n".join(map(str, events)))
        for number, (got, want) in enumerate(zip(events, EXPECTED_EVENTS)):
            self.assertEqual(got[:10], want[:10], f"event {number}")
            if want[10] is None:
                self.assertIsNone(got[10], f"event {number}: a free takes no stack by default")
            else:
                self.assertIsNotNone(got[10], f"event {number}: no stack")
                self.assertIn(want[10], got[10], f"event {number}: the stack starts in the app's {want[10]}")
        sources = db.execute("SELECT DISTINCT s.name FROM events e JOIN sources s ON s.id = e.source").fetchall()
        self.assertEqual(sources, [(source,)])
        failures = db.execute("SELECT device_free, device_total FROM alloc_failures ORDER BY event_id").fetchall()
        self.assertEqual(failures, EXPECTED_FAILURES)
        samples = db.execute("SELECT pool, device, reserved_bytes, used_bytes FROM pool_usage "
                             "ORDER BY rowid").fetchall()
        # The hook path's samples in order; among them the writer's own (recorder/pool_peaks.h: after a batch in
        # which a pool reached a new used peak, and every pool at exit), whose number depends on the batches.
        expected = iter(EXPECTED_POOL_SAMPLES)
        wanted = next(expected)
        extra = []
        for sample in samples:
            if sample == wanted:
                wanted = next(expected, None)
            else:
                extra.append(sample)
        self.assertIsNone(wanted, f"hook-path samples missing or out of order: {samples}")
        self.assertTrue(extra, "no sample taken by the writer")
        self.assertEqual({(pool, device) for pool, device, _, _ in extra}, {(DEFAULT_POOL, 0), (POOL, 0)}, extra)
        self.assertIn((POOL, 0, 32 * MIB, 0), extra)  # at exit: the pool kept its reservation, nothing used
        devices = db.execute("SELECT ordinal, name, uuid, total_bytes, pci_bus_id FROM devices ORDER BY ordinal")
        self.assertEqual(devices.fetchall(), EXPECTED_DEVICES)

    def test_driver_hooks_record_every_call(self):
        with self.profile("hooks") as db:
            self.check_trace(db, "hooks", "driver_hook")

    def test_cupti_callbacks_record_every_call(self):
        with self.profile("cupti") as db:
            self.check_trace(db, "cupti", "cupti")

    def test_both_backends_record_the_same_rows(self):
        with self.profile("hooks") as hooks, self.profile("cupti") as cupti:
            self.assertEqual(self.events(hooks), self.events(cupti))


CUDART_APP = os.path.join(FAKE_DIR, "cudart_over_driver_app")


@unittest.skipUnless(os.path.exists(CUDART_APP), "the fake driver fixture is not built")
class RuntimeHooksOverADriverTest(TraceDirTestCase):
    """The runtime backend's hooks name the device of the thread's current driver context, the one a runtime call
    operates on (interpose/context_device.h), not cudaGetDevice's answer: cudart_over_driver_app's third
    allocation runs with device 1 set in the (simulated) runtime and device 0's context current."""

    def test_each_event_names_the_device_of_the_current_context(self):
        trace = self.path("runtime.db")
        path = os.environ.get("LD_LIBRARY_PATH", "")
        result = run_cli("run", "-q", "--backend", "runtime", "-o", trace, "--", CUDART_APP,
                         env={"LD_LIBRARY_PATH": FAKE_DIR + (":" + path if path else ""),
                              "GMT_SIM_DEVICE_COUNT": "2", "GMT_SIM_QUIET": "1"})
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("cudart_over_driver_app: done", result.stdout)
        db = sqlite3.connect(trace)
        self.assertEqual(db.execute("SELECT value FROM meta WHERE key = 'backend'").fetchone(), ("runtime",))
        events = db.execute("SELECT k.name, a.name, e.device, e.size FROM events e "
                            "JOIN event_kinds k ON k.id = e.kind JOIN apis a ON a.id = e.api "
                            "ORDER BY e.id").fetchall()
        self.assertEqual(events, [
            ("alloc", "cudaMalloc", 0, MIB),
            ("alloc", "cudaMalloc", 1, 2 * MIB),
            ("alloc", "cudaMalloc", 0, 3 * MIB),
            ("free", "cudaFree", 0, 0),
            ("free", "cudaFree", 1, 0),
            ("free", "cudaFree", 0, 0),
        ])


if __name__ == "__main__":
    unittest.main()
