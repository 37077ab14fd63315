"""The GPU suite for the default backend and its cross-check (docs/design.md, "Backends: who counts an allocation"):

- `auto` picks the driver hooks (meta backend hooks, backend_reason hooks_bind, nothing said on stderr) for every
  sample and framework program below, also under compute-sanitizer, which holds CUPTI;
- `run --verify` (the hooks count, CUPTI records every event too) shows 0 disagreements on every CUDA sample of
  samples/ and on PyTorch (three allocator settings), CuPy (its pools and pinned memory) and JAX (preallocated and
  the platform allocator), in every process of each run, while the report's figures count each allocation once
  (the programs' own leak counts);
- where the hooks cannot see the app (another library's dlsym preloaded before ours; the library not preloaded, loaded
  by the driver through CUDA_INJECTION64_PATH) `auto` counts with CUPTI and says why once, and --verify there shows
  the hooks missing every event: the cross-check finds a blind backend on a real GPU;
- under compute-sanitizer --verify says that no cross-check ran, and report --fail-on-disagreement fails.
Skips (exit 77) without a GPU; the framework cases skip without their framework."""
import glob
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, find_leak, parse_truth, report_json, run_cli, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SAMPLES_DIR = os.environ.get("GMT_SAMPLES_DIR", "samples")
BUILD_DIR = os.environ.get("GMT_BUILD_DIR", "build")

# Every CUDA program of samples/ (samples/CMakeLists.txt), with arguments that keep it short, its exit status, and
# what of its own account ("truth:" line) the report must equal: "exact" (leaked bytes and allocations, failed
# allocations: the samples the backends suite checks so), "leaks" (leaked bytes and allocations), or None (a trace
# per process, or no such line).
SAMPLE_RUNS = [
    ("leaky", [], 0, "exact"),
    ("leaky_static", [], 0, "exact"),  # nvcc's default static cudart
    ("no_leaks", [], 0, "leaks"),
    ("threaded", ["8", "2000"], 0, "leaks"),
    ("forking", ["fork"], 0, None),  # a trace per process
    ("forking", ["exec"], 0, None),
    ("async_pools", ["2000"], 0, "exact"),
    ("crashy", ["steady", "300"], 0, None),
    ("crashy", ["segv", "400"], 128 + 11, "leaks"),  # incomplete trace: every event written at the signal
    ("steady_state", ["100"], 0, None),
    ("slow_leak", ["20"], 0, None),
    ("fragmenting", [], 0, None),
    ("oom_fragmented", [], 0, None),  # fills the device, then fails allocations: failures both backends see
    ("nvtx_ranges", [], 0, "leaks"),
    ("rank_worker", ["0", "3"], 0, None),
    ("range_steps", [], 0, None),
    ("ipc_share", [], 0, None),  # an exporter and the importer it spawns; IPC opens and closes
    ("regressing_base", [], 0, None),
    ("regressing_new", [], 0, None),
    ("driver_api", [], 0, "exact"),  # linked with -lcuda: the exported driver symbols
    ("vmm", [], 0, None),  # cuMemCreate/Map/Unmap/Release by hand
    ("context_cycle", [], 0, "leaks"),  # contexts destroyed and made again
    ("stack_shapes", [os.path.join(SAMPLES_DIR, "libstack_shapes_plugin.so"), "3"], 0, None),
]

CUPY_SCRIPT = """
import cupy, cupyx
arrays = [cupy.random.random((256, 1024 * (i + 1))) for i in range(24)]
total = float(sum(float(a.sum()) for a in arrays))
del arrays
cupy.get_default_memory_pool().free_all_blocks()  # each cached block goes back to CUDA
pinned = cupyx.empty_pinned((1 << 20,), dtype=cupy.float32)  # page-locked host memory
pinned[:] = 1
del pinned
cupy.get_default_pinned_memory_pool().free_all_blocks()
pool = cupy.cuda.MemoryAsyncPool()  # cudaMallocAsync / cudaFreeAsync
with cupy.cuda.using_allocator(pool.malloc):
    y = cupy.ones((1 << 20,), dtype=cupy.float32)
    total += float(y.sum())
    del y
cupy.cuda.Device().synchronize()
print(f"cupy: total={total:.1f}", flush=True)
"""

JAX_SCRIPT = """
import jax
import jax.numpy as jnp
xs = [jnp.ones((512, 512 * (i + 1)), dtype=jnp.float32) for i in range(16)]
total = float(sum(float(jnp.sum(x)) for x in xs))
del xs
y = (jnp.ones((2048, 2048)) @ jnp.ones((2048, 2048))).block_until_ready()
print(f"jax: total={total} y={float(y[0, 0])}", flush=True)
"""


def has_module(module, check="True"):
    return subprocess.run([PYTHON, "-c", f"import {module}; assert {check}"], capture_output=True).returncode == 0


def meta_of(trace):
    with sqlite3.connect(trace) as db:
        return dict(db.execute("SELECT key, value FROM meta"))


class VerifyTestCase(TraceDirTestCase):
    figures = []

    def verify_run(self, label, command, expected_exit=0, env=None):
        """run --verify COMMAND in a directory of its own; returns (traces, result)."""
        directory = self.path(label)
        os.makedirs(directory)
        result = run_cli("run", "--verify", "-o", os.path.join(directory, "trace.db"), "--", *command, env=env,
                         timeout=600)
        self.assertEqual(result.returncode, expected_exit, result.stdout[-2000:] + result.stderr[-3000:])
        traces = sorted(glob.glob(os.path.join(directory, "*.db")))
        self.assertTrue(traces, result.stderr[-2000:])
        return traces, result

    def assert_backends_agree(self, label, trace, result):
        """Auto chose the hooks, CUPTI cross-checked, and they agree on every event; returns the report."""
        meta = meta_of(trace)
        self.assertEqual((meta.get("backend"), meta.get("backend_reason")), ("hooks", "hooks_bind"),
                         f"{label}: {meta}\n{result.stderr[-2000:]}")
        self.assertNotIn("backend_note", meta, label)
        self.assertEqual(meta.get("verify_backend"), "cupti", f"{label}: {meta}\n{result.stderr[-2000:]}")
        report = report_json(trace, "--top", "50")
        check = report["cross_check"]
        shown = [(g["seen_by"], g["kind"], g["api"], g["memory_kind"], g["count"], g["bytes"],
                  [f.get("function") for f in g["stack"][:4]]) for g in check["groups"][:10]]
        self.assertEqual(check["disagreements"], 0, f"{label} ({os.path.basename(trace)}): {shown}")
        self.assertEqual(check["matched"], check["counting_events"], label)
        self.assertEqual(check["matched"], check["checking_events"], label)
        self.assertGreater(check["matched"], 0, label)
        # A crashed sample's trace is incomplete: a gate gives no verdict on it unless asked to judge what it holds.
        incomplete = () if report["trace"]["complete"] else ("--allow-incomplete",)
        gate = run_cli("report", "--fail-on-disagreement", *incomplete, "--format", "json", "-o", os.devnull, trace)
        self.assertEqual(gate.returncode, 0, gate.stderr)
        self.figures.append(f"verify {label} ({os.path.basename(trace)}): {check['matched']} events matched, "
                            f"0 disagreements, {check['named_differently']} named differently, "
                            f"{check['on_other_device']} on another device; allocations "
                            f"{report['totals']['allocations']}, leaked {report['totals']['leaked_bytes']} B")
        return report

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)


class VerifySamplesTest(VerifyTestCase):
    def test_every_sample_agrees_and_counts_once(self):
        for name, args, expected_exit, truth_check in SAMPLE_RUNS:
            label = "-".join([name, *[os.path.basename(a) for a in args]])
            with self.subTest(sample=label):
                traces, result = self.verify_run(label, [sample(name), *args], expected_exit)
                for trace in traces:
                    self.assert_backends_agree(label, trace, result)
                self.assertIn("cross-check: hooks and cupti agree", result.stderr)
                self.assertNotIn("DISAGREEMENTS", result.stderr)
                if truth_check:
                    truth = parse_truth(result.stdout)
                    self.assertEqual(len(traces), 1, traces)
                    self.assertEqual(len(truth), 1, result.stdout[-2000:])
                    totals = report_json(traces[0])["totals"]
                    # The cross-check's events count nowhere: the figures are the program's own.
                    self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]),
                                     (truth[0]["leaked_bytes"], truth[0]["leaked_allocations"]), label)
                    if truth_check == "exact":
                        self.assertEqual(totals["failed_allocations"], truth[0]["failed_allocations"], label)

    def test_leaky_sites_are_the_hooks_own(self):
        traces, result = self.verify_run("leaky-sites", [sample("leaky")])
        report = self.assert_backends_agree("leaky-sites", traces[0], result)
        for function, size in (("load_weights", 4 << 20), ("async_scratch", 512 << 10)):
            self.assertEqual(find_leak(report, function)["bytes"], size)
        text = run_cli("report", traces[0]).stdout
        self.assertIn("Cross-check (run --verify): hooks and cupti agree: ", text)


class VerifyFrameworksTest(VerifyTestCase):
    def script(self, name, text):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check_program(self, label, command, env=None, truth=None):
        traces, result = self.verify_run(label, command, env=env)
        reports = [self.assert_backends_agree(label, trace, result) for trace in traces]
        if truth is not None:
            # PyTorch rounds the leaked tensor up to its segment: at least the truth, less than a segment more.
            leaked = reports[0]["totals"]["leaked_bytes"]
            self.assertGreaterEqual(leaked, truth)
            self.assertLess(leaked, truth + (64 << 20))
        return result

    def test_pytorch_under_each_allocator_setting(self):
        if not has_module("torch", "torch.cuda.is_available()"):
            self.skipTest("no PyTorch with CUDA here")
        script = os.path.join(SOURCE, "samples", "torch_leak.py")
        for config in ("", "expandable_segments:True", "backend:cudaMallocAsync"):
            with self.subTest(config=config or "default"):
                env = {"PYTORCH_CUDA_ALLOC_CONF": config}
                label = "torch-" + (config.replace(":", "_") or "default")
                result = self.check_program(label, [PYTHON, script], env=env, truth=256 << 20)
                self.assertEqual(parse_truth(result.stdout)[0]["leaked_bytes"], 256 << 20)

    def test_pytorch_training_loop(self):
        if not has_module("torch", "torch.cuda.is_available()"):
            self.skipTest("no PyTorch with CUDA here")
        self.check_program("torch-training", [PYTHON, os.path.join(SOURCE, "samples", "torch_training_leak.py")])

    def test_cupy_pools_and_pinned_memory(self):
        if not has_module("cupy"):
            self.skipTest("no CuPy here")
        result = self.check_program("cupy", [PYTHON, self.script("cupy_program.py", CUPY_SCRIPT)])
        self.assertIn("cupy: total=", result.stdout)
        self.check_program("cupy-pool-sample", [PYTHON, os.path.join(SOURCE, "samples", "cupy_pool.py")])

    def test_jax_preallocated_and_platform_allocator(self):
        if not has_module("jax", "any(d.platform == 'gpu' for d in __import__('jax').devices())"):
            self.skipTest("no JAX with a GPU here")
        self.check_program("jax-prealloc", [PYTHON, os.path.join(SOURCE, "samples", "jax_prealloc.py")])
        # Every array its own cuMemAlloc and cuMemFree.
        env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
        result = self.check_program("jax-platform", [PYTHON, self.script("jax_program.py", JAX_SCRIPT)], env=env)
        self.assertIn("jax: total=", result.stdout)


class WhereTheHooksCannotSeeTest(VerifyTestCase):
    """Two processes whose lookups of the driver do not go through our dlsym: another library's dlsym preloaded
    before ours that answers every lookup itself (tests/backend/other_dlsym.c), and the library not preloaded at all,
    loaded by the driver through CUDA_INJECTION64_PATH (given static TLS room for it: docs/design.md)."""

    OTHER_DLSYM = os.path.join(BUILD_DIR, "tests", "backend", "libother_dlsym.so")
    LIBRARY = os.path.join(BUILD_DIR, "lib", "gpumemtrace", "libgpumemtrace.so")
    NOT_PRELOADED = "gpumemtrace's library was not preloaded into this process"
    STATIC_TLS_ROOM = "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536"

    def other_dlsym_first(self):
        for path in (self.OTHER_DLSYM, self.LIBRARY):
            if not os.path.exists(path):
                self.skipTest(f"not built: {path}")
        return ["env", f"LD_PRELOAD={self.OTHER_DLSYM}:{self.LIBRARY}", sample("leaky")]

    def check_cupti_counted(self, label, command, reason):
        trace = self.path(f"{label}.db")
        result = run_cli("run", "-o", trace, "--", *command)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        said = [line for line in result.stderr.splitlines() if "the driver hooks cannot see" in line]
        self.assertEqual(len(said), 1, result.stderr[-3000:])
        self.assertIn(reason, said[0])
        self.assertTrue(said[0].endswith("; counting with CUPTI instead"), said[0])
        meta = meta_of(trace)
        self.assertEqual((meta["backend"], meta["backend_reason"]), ("cupti", "hooks_cannot_bind"))
        self.assertIn(reason, meta["backend_note"])
        report = report_json(trace)
        truth = parse_truth(result.stdout)[0]
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        self.assertEqual(find_leak(report, "load_weights")["bytes"], 4 << 20)
        self.assertIn("  backend    cupti: the driver hooks cannot see", run_cli("report", trace).stdout)
        self.figures.append(f"{label}: auto = cupti, leaked {report['totals']['leaked_bytes']} B; said: {said[0]}")

    def test_another_dlsym_first_auto_counts_with_cupti_and_says_why_once(self):
        self.check_cupti_counted("other-dlsym", self.other_dlsym_first(),
                                 f"another library's dlsym comes before gpumemtrace's in this process "
                                 f"({self.OTHER_DLSYM})")

    def test_not_preloaded_auto_counts_with_cupti_and_says_why_once(self):
        self.check_cupti_counted("not-preloaded", ["env", "-u", "LD_PRELOAD", self.STATIC_TLS_ROOM, sample("leaky")],
                                 self.NOT_PRELOADED)

    def test_verify_finds_that_the_hooks_miss_every_event(self):
        traces, result = self.verify_run("blind-hooks", self.other_dlsym_first())
        self.assertEqual(len(traces), 1, traces)
        check = report_json(traces[0])["cross_check"]
        self.assertEqual((check["counting_backend"], check["checking_backend"]), ("cupti", "hooks"))
        self.assertGreater(check["counting_events"], 40)  # leaky: 26 allocations, 20 frees, 1 failure
        self.assertEqual((check["matched"], check["checking_events"], check["only_checking"]), (0, 0, 0))
        self.assertEqual(check["only_counting"], check["counting_events"])
        self.assertIn("DISAGREEMENTS", result.stderr)
        gate = run_cli("report", "--fail-on-disagreement", "-o", os.devnull, traces[0])
        self.assertEqual(gate.returncode, 1, gate.stderr)
        self.assertIn("--fail-on-disagreement failed:", gate.stderr)
        text = run_cli("report", traces[0]).stdout
        self.assertLess(text.index("Cross-check (run --verify):"), text.index("\nTotals\n"))
        self.figures.append(f"blind hooks: {check['only_counting']} of {check['counting_events']} events only cupti saw")


class UnderComputeSanitizerTest(VerifyTestCase):
    def sanitizer(self):
        path = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        if not os.path.exists(path):
            self.skipTest("compute-sanitizer not installed")
        return path

    def test_auto_keeps_the_hooks_and_verify_says_no_cross_check_ran(self):
        sanitizer = self.sanitizer()
        for verify in (False, True):
            with self.subTest(verify=verify):
                trace = self.path(f"sanitizer-{verify}.db")
                result = subprocess.run([sanitizer, "--leak-check", "full", CLI, "run",
                                         *(["--verify"] if verify else []), "-o", trace, "--", sample("leaky")],
                                        capture_output=True, text=True, timeout=600)
                self.assertEqual(result.returncode, 0, result.stdout[-2000:] + result.stderr[-2000:])
                meta = meta_of(trace)
                self.assertEqual((meta["backend"], meta["backend_reason"]), ("hooks", "hooks_bind"))
                self.assertNotIn("backend_note", meta)
                report = report_json(trace)
                self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                                 (5570560, 6))
                gate = run_cli("report", "--fail-on-disagreement", "-o", os.devnull, trace)
                if not verify:
                    self.assertNotIn("verify_unavailable", meta)
                    self.assertEqual(gate.returncode, 2, gate.stderr)
                    continue
                self.assertIn("CUPTI is held by another tool", meta["verify_unavailable"])
                said = [line for line in result.stderr.splitlines() if "--verify: no cross-check" in line]
                self.assertEqual(len(said), 1, result.stderr[-3000:])
                self.assertIsNone(report["cross_check"]["checking_backend"])
                self.assertEqual(gate.returncode, 1, gate.stderr)
                self.assertIn("the cross-check did not run: CUPTI is held by another tool", gate.stderr)
                self.figures.append("under compute-sanitizer: " + said[0])


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
