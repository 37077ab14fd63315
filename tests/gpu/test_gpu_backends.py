"""The GPU suite for the driver-level backends: CUPTI and the driver entry-point hooks must each see every
allocation path (static cudart, shared cudart, the driver API, VMM by hand, stream-ordered pools from two
threads, managed and pinned memory, fork and exec) and report exactly what the program knows it leaked,
which compute-sanitizer's leak check confirms. Also PyTorch under its three allocator settings, and a run
under compute-sanitizer (which holds CUPTI) falling back to the hooks. Skips (exit 77) without a GPU."""
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import (CLI, TraceDirTestCase, find_leak, marker_line, parse_truth, report_json,  # noqa: E402
                     run_cli, sample)
from test_gpu_samples import SKIP, have_gpu, sanitizer_leaks, have_torch_cuda  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from pairs_ab import expected_recording  # noqa: E402

BACKENDS = ("cupti", "hooks")
SOURCE_OF = {"cupti": 2, "hooks": 3}  # schema Source codes
PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")

# sample -> (arguments, {leak-site function: (bytes, count)} or None when only totals are checked)
SAMPLES = {
    "leaky": ([], {"load_weights": (4 << 20, 1), "make_workspace": (3 * (256 << 10), 3),
                   "stage_host_buffer": (64 << 10, 1), "async_scratch": (512 << 10, 1)}),
    "leaky_static": ([], {"load_weights": (4 << 20, 1), "make_workspace": (3 * (256 << 10), 3),
                          "stage_host_buffer": (64 << 10, 1), "async_scratch": (512 << 10, 1)}),
    "driver_api": ([], {"driver_device_buffer": (3 << 20, 1), "driver_host_buffer": (128 << 10, 1),
                        "driver_managed_buffer": (1 << 20, 1)}),
    "vmm": ([], None),
    "async_pools": (["2000"], {"pool_leak": (3 << 20, 2), "default_pool_leak": (3 << 20, 1)}),
}
SOURCE_FILE = {"leaky_static": "leaky.cu"}


class BackendSamplesTest(TraceDirTestCase):
    figures = []

    def profile(self, backend, name, args):
        trace = self.path(f"{name}-{backend}.db")
        result = run_cli("run", "--backend", backend, "-o", trace, "--", sample(name), *args)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        report = report_json(trace)
        self.assertEqual(report["trace"]["backend"], backend, result.stderr)
        return trace, result, report

    def check_sample(self, backend, name):
        args, sites = SAMPLES[name]
        trace, result, report = self.profile(backend, name, args)
        truth = parse_truth(result.stdout)[0]
        totals = report["totals"]
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]), f"{name} under {backend}")
        self.assertEqual(totals["failed_allocations"], truth["failed_allocations"],
                         f"{name} under {backend}: failures {report['failures']}")
        self.assertEqual(totals["unmatched_frees"], 0)
        for function, (size, count) in (sites or {}).items():
            leak = find_leak(report, function)
            self.assertEqual((leak["bytes"], leak["count"]), (size, count), function)
            source = SOURCE_FILE.get(name, f"{name}.cu")
            self.assertEqual(leak["stack"][0]["line"], marker_line(source, f"LEAK-SITE: {function}"), function)
        # Every memory event was counted by the backend asked for, and only once.
        db = sqlite3.connect(trace)
        sources = {row[0] for row in db.execute("SELECT DISTINCT source FROM events WHERE kind IN (1, 2, 3, 12)")}
        pool_samples = db.execute("SELECT count(*), count(DISTINCT pool), max(reserved_bytes), max(used_bytes), "
                                  "sum(reserved_bytes < used_bytes) FROM pool_usage").fetchone()
        db.close()
        self.assertEqual(sources, {SOURCE_OF[backend]}, f"{name}: event sources under {backend}")
        if name == "async_pools":
            # The custom pool and the default pool were sampled; a pool never hands out more than it holds.
            samples, pools, max_reserved, max_used, inverted = pool_samples
            self.assertGreaterEqual(pools, 2, pool_samples)
            self.assertGreater(max_reserved, 0)
            self.assertEqual(inverted, 0)
            self.figures.append(f"async_pools pool_usage under {backend}: {samples} samples of {pools} pools, "
                                f"max reserved {max_reserved} B, max used {max_used} B")
            # Used bytes per pool come from the trace's own events, exact: the custom pool's loop allocations are
            # freed at once, so its peak and its end are the two kept allocations (1 + 2 MiB), as under
            # --simulate (tests/e2e/test_async_pools.py).
            by_kind = {p["kind"]: p for p in report["pools"]}
            created = by_kind["created"]
            self.assertTrue(created["used_from_events"])
            self.assertEqual(created["live_allocations"], 2)
            self.assertEqual((created["peak_used_bytes"], created["end_used_bytes"]), (3 << 20, 3 << 20))
            self.assertEqual((by_kind["default"]["peak_used_bytes"], by_kind["default"]["end_used_bytes"]),
                             (3 << 20, 3 << 20))
            self.figures.append(f"async_pools used from events under {backend}: custom pool peak "
                                f"{created['peak_used_bytes']} B, at the end {created['end_used_bytes']} B "
                                f"({created['live_allocations']} of {created['allocations']} allocations live)")
        return report, truth

    def test_a_paused_process_records_nothing_and_every_call_after_resuming(self):
        # bench/pairs_ab switches recording off and on (gmt_set_recording_paused) between blocks of pairs; under
        # cupti a pause also switches CUPTI's driver callbacks off (recorder/backend.h, switch_capture). The
        # allocations recorded are exactly those of the on blocks, and every one of them is (expected_recording).
        blocks, pairs = 8, 256
        bench = os.path.join(os.environ["GMT_BUILD_DIR"], "bench", "pairs_ab")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                trace = self.path(f"pairs_ab-{backend}.db")
                result = run_cli("run", "--backend", backend, "-o", trace, "--", bench, str(blocks), str(pairs), "3")
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                db = sqlite3.connect(trace)
                allocations = dict(db.execute("SELECT a.name, count(*) FROM events e JOIN apis a ON a.id = e.api "
                                              "WHERE e.kind = 1 GROUP BY a.name"))
                meta = dict(db.execute("SELECT key, value FROM meta"))
                db.close()
                expected, pauses = expected_recording(blocks, pairs)
                self.assertEqual(allocations.get("cudaMallocAsync"), expected["cudaMallocAsync"], allocations)
                self.assertEqual(allocations.get("cudaMalloc"), expected["cudaMalloc"], allocations)
                self.assertEqual(int(meta["recording_pauses"]), pauses, meta)

    def test_samples_under_each_backend(self):
        for name in SAMPLES:
            reports = {}
            for backend in BACKENDS:
                with self.subTest(sample=name, backend=backend):
                    reports[backend], truth = self.check_sample(backend, name)
            sanitizer = sanitizer_leaks([sample(name), *SAMPLES[name][0]])
            self.figures.append(
                f"{name}: truth ({truth['leaked_bytes']}, {truth['leaked_allocations']}); "
                + "; ".join(f"{b} ({r['totals']['leaked_bytes']}, {r['totals']['leaked_allocations']}, "
                            f"{r['totals']['allocations']} allocs)" for b, r in reports.items())
                + f"; compute-sanitizer {sanitizer}")

    def test_vmm_released_while_mapped_is_freed_at_unmap(self):
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                _, result, report = self.profile(backend, "vmm", [])
                leak = find_leak(report, "create_physical")
                self.assertEqual(leak["memory_kinds"], ["vmm_physical"])
                self.assertEqual(leak["count"], 1)
                self.assertEqual(report["totals"]["allocations"], 3)
                self.assertEqual(report["totals"]["frees"], 2)

    def test_fork_and_exec_under_each_backend(self):
        for backend in BACKENDS:
            for mode in ("fork", "exec"):
                with self.subTest(backend=backend, mode=mode):
                    trace = self.path(f"{mode}-{backend}.db")
                    result = run_cli("run", "--backend", backend, "-o", trace, "--", sample("forking"), mode)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    children = [f for f in os.listdir(self.dir)
                                if f.startswith(f"{mode}-{backend}.") and f.endswith(".db") and f != os.path.basename(trace)]
                    self.assertEqual(len(children), 1, os.listdir(self.dir))
                    self.assertEqual(report_json(trace)["totals"]["leaked_bytes"], 1 << 20)
                    self.assertEqual(report_json(self.path(children[0]))["totals"]["leaked_bytes"], 2 << 20)

    def test_under_compute_sanitizer_falls_back_to_hooks(self):
        # --backend cupti asked for explicitly: compute-sanitizer holds CUPTI, so the hooks count and the process
        # says why. (auto never asks for CUPTI where the hooks bind: tests/gpu/test_gpu_verify.py.)
        sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if not os.path.exists(sanitizer):
            self.skipTest("compute-sanitizer not installed")
        trace = self.path("under-sanitizer.db")
        result = subprocess.run([sanitizer, "--leak-check", "full", CLI, "run", "--backend", "cupti", "-o", trace, "--",
                                 sample("leaky")], capture_output=True, text=True, timeout=600)
        self.figures.append("under compute-sanitizer: " + " | ".join(
            line for line in result.stderr.splitlines() if "gpumemtrace" in line and "CUPTI" in line))
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        report = report_json(trace)
        self.assertEqual(report["trace"]["backend"], "hooks", result.stderr[-2000:])
        self.assertEqual(report["trace"]["backend_reason"], "cupti_unavailable")
        self.assertIn("CUPTI is held by another tool", report["trace"]["backend_note"])
        self.assertIn("using the driver entry-point hooks instead (--backend hooks)", result.stderr)
        self.assertEqual(report["totals"]["leaked_bytes"], 5570560)
        self.assertEqual(report["totals"]["leaked_allocations"], 6)

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)


RELIABILITY_BIN = os.environ.get("GMT_RELIABILITY_BIN", "")


class UnusualAppsTest(TraceDirTestCase):
    """Apps that reach our dlsym router and our setup in unusual ways, on the real driver."""

    def program(self, name):
        path = os.path.join(RELIABILITY_BIN, name)
        if not os.path.exists(path):
            self.skipTest(f"{name} not built (GMT_RELIABILITY_BIN={RELIABILITY_BIN!r})")
        return path

    def test_address_sanitizer_app_under_each_backend(self):
        # ASan resolves its interceptors through our exported dlsym before it is initialized; cudart then
        # finds the driver through it. protect_shadow_gap=0: CUDA maps memory where ASan reserves its gap.
        program = self.program("sanitized_app_address")
        env = {"ASAN_OPTIONS": "protect_shadow_gap=0:detect_leaks=0"}
        plain = subprocess.run([program, "3"], env=dict(os.environ, **env), capture_output=True, text=True,
                               timeout=300)
        self.assertEqual(plain.returncode, 3, plain.stderr)
        truth = parse_truth(plain.stdout)[0]
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                trace = self.path(f"asan-{backend}.db")
                result = run_cli("run", "--backend", backend, "-q", "-o", trace, "--", program, "3", env=env)
                self.assertEqual(result.returncode, 3, result.stderr[-2000:])
                self.assertEqual(result.stdout, plain.stdout)
                report = report_json(trace)
                self.assertEqual(report["trace"]["backend"], backend)
                self.assertEqual(report["totals"]["allocations"], 103)
                self.assertEqual(report["totals"]["frees"], 100)
                self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
                find_leak(report, "leak_device_buffer")

    def test_library_constructor_allocates_under_each_backend(self):
        # A library the app links allocates in its static constructor, before our constructor ran.
        program = self.program("library_lifetime_app")
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                trace = self.path(f"lifetime-{backend}.db")
                result = run_cli("run", "--backend", backend, "-q", "-o", trace, "--", program)
                self.assertEqual(result.returncode, 0, result.stderr[-2000:])
                self.assertEqual(result.stdout, "holder=1 leaked_bytes=777\n")
                report = report_json(trace)
                self.assertEqual(report["totals"]["allocations"], 3)
                holder = find_leak(report, "DeviceBufferHolder")
                self.assertEqual((holder["bytes"], holder["count"]), (1 << 20, 1))
                # Its destructor's free comes after the trace was closed (docs/reliability.md): counted by `run`.
                t = report["trace"]
                self.assertEqual(t["supports_verdict"], t["frees_after_close"] == 0, t)
                print(f"FIGURE library destructor under {backend}: {t['events_after_close']} events after the "
                      f"trace was closed ({t['frees_after_close']} frees)")


class ContextCycleTest(TraceDirTestCase):
    """Contexts destroyed and made again, by cuCtxDestroy and by cudaDeviceReset (samples/context_cycle.cu): every
    allocation keeps its own context and that context's device, under each backend. The hooks ask the driver for
    a context's device once and keep it until some context is destroyed (interpose/driver_hooks.cpp); a
    destroyed context's address is often the next one's."""

    MIB = 1 << 20

    def test_each_allocation_names_its_context_and_its_device(self):
        # The runtime backend sees the runtime's allocations only (the primary contexts'), and names no context;
        # their device is the current context's, kept per thread as the driver hooks keep it
        # (interpose/context_device.h).
        for backend in BACKENDS + ("runtime",):
            with self.subTest(backend=backend):
                trace = self.path(f"context_cycle-{backend}.db")
                result = run_cli("run", "--backend", backend, "-o", trace, "--", sample("context_cycle"))
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                printed = re.findall(r"^context (\S+) (0x[0-9a-f]+) allocations (\d+)$", result.stdout, re.M)
                self.assertEqual([name for name, *_ in printed],
                                 ["created0", "created1", "created2", "primary0", "primary1"], result.stdout)
                expected = {}  # by address: a reused address holds the allocations of each context made there
                for name, address, count in printed:
                    if backend != "runtime" or name.startswith("primary"):
                        expected[int(address, 16)] = expected.get(int(address, 16), 0) + int(count)
                db = sqlite3.connect(trace)
                rows = db.execute("SELECT context, device, count(*) FROM events WHERE kind = 1 AND size IN "
                                  f"({self.MIB}, {2 * self.MIB}, {3 * self.MIB}, {4 * self.MIB}) "
                                  "GROUP BY context, device").fetchall()
                db.close()
                if backend == "runtime":
                    # Its verdicts are not this test's: it misses the driver API's allocations and their frees.
                    self.assertEqual([(device, n) for _, device, n in rows], [(0, sum(expected.values()))])
                    print(f"FIGURE context_cycle under runtime: {sum(expected.values())} runtime allocations, "
                          "each on its context's device")
                    continue
                self.assertEqual({(context, device): n for context, device, n in rows},
                                 {(address, 0): n for address, n in expected.items()})
                report = report_json(trace)
                truth = parse_truth(result.stdout)[0]
                self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
                self.assertEqual(report["totals"]["unmatched_frees"], 0)
                self.assertEqual(find_leak(report, "keep_last_buffer")["bytes"], 2 * self.MIB)
                print(f"FIGURE context_cycle under {backend}: 5 contexts at {len(expected)} addresses, every "
                      "allocation on its context's device")


class CuptiRuntimeNamesTest(TraceDirTestCase):
    """Under CUPTI the runtime-API callbacks only name events; they are switched off once the cudart hooks name
    the allocations (cupti/runtime_naming.h). Names and counts must not change: leaky (shared cudart, named by
    the hooks with the callbacks off) and leaky_static (static cudart, named by the callbacks, which stay on)
    record exactly the events of leaky under the runtime backend, api names included; so does the old
    behaviour (GMT_CUPTI_RUNTIME_CALLBACKS=1)."""

    def memory_events(self, backend, name, env=None, tag=""):
        trace = self.path(f"names-{name}-{backend}{tag}.db")
        env = {"GMT_DEBUG_CUPTI_NAMING": "1", **(env or {})}
        result = run_cli("run", "--backend", backend, "-o", trace, "--", sample(name), env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        db = sqlite3.connect(trace)
        rows = db.execute("SELECT e.kind, a.name, e.memory_kind, e.size FROM events e JOIN apis a ON a.id = e.api "
                          "WHERE e.kind IN (1, 2, 3) ORDER BY e.id").fetchall()
        backend_used = db.execute("SELECT value FROM meta WHERE key = 'backend'").fetchone()[0]
        db.close()
        self.assertEqual(backend_used, backend, result.stderr)
        return sorted(rows), result.stderr

    def test_api_names_and_counts_equal_the_runtime_backends(self):
        expected, _ = self.memory_events("runtime", "leaky")
        self.assertTrue(expected)
        self.assertTrue(all(api.startswith("cuda") for _, api, _, _ in expected), expected)
        switched_off = "runtime-API callbacks off"
        on_again = "runtime-API callbacks on again"
        for name in ("leaky", "leaky_static"):
            for forced in (False, True):
                with self.subTest(sample=name, forced=forced):
                    env = {"GMT_CUPTI_RUNTIME_CALLBACKS": "1"} if forced else {}
                    rows, stderr = self.memory_events("cupti", name, env, "-forced" if forced else "")
                    self.assertEqual(rows, expected, stderr[-2000:])
                    # The shared cudart's hooks switch the callbacks off; a static cudart keeps them on.
                    self.assertEqual(switched_off in stderr, name == "leaky" and not forced, stderr[-2000:])
                    self.assertNotIn(on_again, stderr)


class PyTorchTest(TraceDirTestCase):
    figures = []

    def run_torch(self, config):
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if config:
            env["PYTORCH_CUDA_ALLOC_CONF"] = config
        trace = self.path(f"torch-{config or 'default'}.db".replace(":", "_"))
        script = os.path.join(os.environ.get("GMT_SOURCE_DIR", "."), "samples", "torch_leak.py")
        # The CUDA level, as each backend sees it: PyTorch's tensors (recorded by default) would name the leak by
        # its tensor block instead (gpu.torch_blocks checks those).
        result = subprocess.run([CLI, "run", "--no-torch-blocks", "-o", trace, "--", PYTHON, script],
                                capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace)
        largest = report["leaks"][0] if report["leaks"] else None
        leaked = report["totals"]["leaked_bytes"]
        self.figures.append(f"torch {config or 'default'}: backend {report['trace']['backend']}, leaked "
                            f"{leaked} B in {report['totals']['leaked_allocations']} allocations, "
                            f"{len(report['leaks'])} groups; largest {largest and largest['bytes']} B via "
                            f"{largest and largest['apis']} ({largest and largest['memory_kinds']})")
        self.assertIsNotNone(largest)
        # The 256 MiB tensor's memory is still held at exit (rounded up to the allocator's page or segment
        # size), allocated from PyTorch's CUDA code; nothing else is.
        self.assertGreaterEqual(leaked, truth["leaked_bytes"])
        self.assertLess(leaked, truth["leaked_bytes"] + (64 << 20))
        modules = {os.path.basename(frame["module"] or "") for frame in largest["stack"]}
        self.assertTrue(any(m.startswith("libc10_cuda") or m.startswith("libtorch") for m in modules), modules)
        return report, largest

    def test_default_allocator(self):
        _, largest = self.run_torch("")
        self.assertIn("cudaMalloc", largest["apis"])

    def test_expandable_segments(self):
        report, largest = self.run_torch("expandable_segments:True")
        # Growth is cuMemCreate + cuMemMap of 20 MiB pages: the leak is physical VMM memory.
        self.assertEqual(largest["memory_kinds"], ["vmm_physical"])
        self.assertIn("cuMemCreate", largest["apis"])
        self.assertEqual(report["leaked_by_kind"]["vmm_physical"], report["totals"]["leaked_bytes"])

    def test_cuda_malloc_async_backend(self):
        _, largest = self.run_torch("backend:cudaMallocAsync")
        self.assertIn("cudaMallocAsync", largest["apis"])

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
