"""The backend choice in real processes, without a GPU: a stand-in libcuda.so.1 (fake_libcuda.c) under a driver-API
app that reaches it the way cudart does, dlopen and then dlsym on its handle (driver_app.c). Preloaded, `auto` counts
with the driver hooks, says nothing, never loads CUPTI and records why (meta backend_reason hooks_bind). Where the
hooks cannot see the app the process says so once, naming the reason interpose/hooks_reach.cpp found: the library
not preloaded (the stand-in driver loads it through CUDA_INJECTION64_PATH, as the real one does, given room for its
static TLS), or another library's dlsym first. Those two run with --backend hooks: `auto` would start CUPTI there, which needs a real driver
(tests/gpu/test_gpu_verify.py has that half)."""
import os
import sqlite3
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import TraceDirTestCase, report_json, run_cli  # noqa: E402

FAKE_CUDA_DIR = os.environ.get("GMT_FAKE_CUDA_DIR", "")
APP = os.environ.get("GMT_DRIVER_APP", "")
OTHER_DLSYM = os.environ.get("GMT_OTHER_DLSYM", "")
LIBRARY = os.environ.get("GMT_PRELOAD_LIBRARY", "")
CU_MEM_ALLOC, CU_MEM_FREE, HOOKS = 18, 23, 3  # schema Api and Source codes
NOT_PRELOADED = "gpumemtrace's library was not preloaded into this process"
STATIC_TLS_ROOM = "GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536"


def driver_env():
    """The stand-in driver first on the library path: the app's dlopen("libcuda.so.1") finds it."""
    path = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": FAKE_CUDA_DIR + (":" + path if path else "")}


def test_preloads():
    """What the test itself runs with preloaded (a sanitizer's runtime in scripts/sanitize.sh), kept first."""
    return [entry for entry in os.environ.get("LD_PRELOAD", "").split(":") if entry]


class BackendChoiceTest(TraceDirTestCase):
    def setUp(self):
        super().setUp()
        for path in (FAKE_CUDA_DIR, APP, OTHER_DLSYM, LIBRARY):
            if not os.path.exists(path):
                self.skipTest(f"not built: {path!r} (run through ctest)")

    def said(self, stderr, text):
        return [line for line in stderr.splitlines() if text in line]

    def test_auto_counts_with_the_hooks_where_they_bind(self):
        trace = self.path("bound.db")
        result = run_cli("run", "-o", trace, "--", APP, env=driver_env())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("driver_app: allocated 4096 and 1048576, freed 4096", result.stdout)
        self.assertEqual(self.said(result.stderr, "hooks"), [], result.stderr)
        self.assertEqual(self.said(result.stderr, "CUPTI"), [], result.stderr)
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            events = db.execute("SELECT kind, api, source, size FROM events WHERE kind IN (1, 2) ORDER BY id").fetchall()
        self.assertEqual((meta["backend"], meta["backend_reason"]), ("hooks", "hooks_bind"))
        self.assertNotIn("backend_note", meta)
        self.assertNotIn("verify_backend", meta)
        self.assertEqual(events, [(1, CU_MEM_ALLOC, HOOKS, 4096), (1, CU_MEM_ALLOC, HOOKS, 1 << 20),
                                  (2, CU_MEM_FREE, HOOKS, 0)])
        totals = report_json(trace)["totals"]
        self.assertEqual((totals["allocations"], totals["frees"], totals["leaked_bytes"]), (2, 1, 1 << 20))

    def test_verify_where_cupti_cannot_start_counts_once_and_says_nothing_was_compared(self):
        # CUPTI cannot be had: GMT_CUPTI_LIBRARY names a library without its entry points (the stand-in driver), so
        # no real libcupti is loaded onto the stand-in driver. The hooks count alone, and the trace says why there
        # is no cross-check, so the gate cannot pass on it.
        trace = self.path("verify.db")
        not_cupti = os.path.join(FAKE_CUDA_DIR, "libcuda.so.1")
        result = run_cli("run", "--verify", "-o", trace, "--", APP, env={**driver_env(), "GMT_CUPTI_LIBRARY": not_cupti})
        self.assertEqual(result.returncode, 0, result.stderr)
        said = self.said(result.stderr, "--verify")
        self.assertEqual(len(said), 1, result.stderr)
        self.assertTrue(said[0].startswith("gpumemtrace: --verify: no cross-check in this process: CUPTI cannot be "
                                           "used: "), said[0])
        self.assertIn("  cross-check: did not run: CUPTI cannot be used: ", result.stderr)
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta"))
            sources = db.execute("SELECT DISTINCT source FROM events").fetchall()
        self.assertEqual((meta["backend"], meta["backend_reason"]), ("hooks", "hooks_bind"))
        self.assertNotIn("verify_backend", meta)
        self.assertEqual(meta["verify_unavailable"], f"CUPTI cannot be used: {not_cupti} lacks cuptiGetResultString, "
                         "cuptiSubscribe, cuptiUnsubscribe, cuptiEnableCallback, cuptiGetDeviceId")
        self.assertEqual(sources, [(HOOKS,)])
        report = report_json(trace)
        self.assertFalse(report["cross_check"]["ran"])
        self.assertEqual((report["totals"]["allocations"], report["totals"]["frees"]), (2, 1))
        gate = run_cli("report", "--fail-on-disagreement", trace)
        self.assertEqual(gate.returncode, 1, gate.stderr)
        self.assertIn("Cross-check (run --verify): did not run: CUPTI cannot be used: ", gate.stdout)

    def test_a_library_that_was_not_preloaded_says_the_hooks_cannot_see(self):
        # `env` drops our preload (and keeps the test's own); the stand-in driver's cuInit loads the library. A library
        # loaded after start-up needs room in the static TLS block for its initial-exec TLS (~12 KiB; glibc keeps 512
        # bytes spare by default): without it dlopen fails and nothing is recorded at all (docs/design.md).
        command = ["env", "LD_PRELOAD=" + ":".join(test_preloads()), STATIC_TLS_ROOM, APP]
        result = run_cli("run", "--backend", "hooks", "-o", self.path("injected.db"), "--", *command,
                         env=driver_env())
        self.assertEqual(result.returncode, 0, result.stderr)
        said = self.said(result.stderr, "may miss")
        self.assertEqual(len(said), 1, result.stderr)
        self.assertTrue(said[0].startswith("gpumemtrace: warning: --backend hooks: the driver hooks may miss this "
                                           f"process's allocations: {NOT_PRELOADED}"), said[0])
        self.assertTrue(said[0].endswith("(--backend cupti sees them)"), said[0])

    def test_another_dlsym_first_is_named(self):
        command = ["env", "LD_PRELOAD=" + ":".join([*test_preloads(), OTHER_DLSYM, LIBRARY]), APP]
        result = run_cli("run", "--backend", "hooks", "-o", self.path("other.db"), "--", *command, env=driver_env())
        self.assertEqual(result.returncode, 0, result.stderr)
        said = self.said(result.stderr, "may miss")
        self.assertEqual(len(said), 1, result.stderr)
        self.assertIn(f"another library's dlsym comes before gpumemtrace's in this process ({OTHER_DLSYM}), so the "
                      "driver's entry points are not looked up through its hooks", said[0])


if __name__ == "__main__":
    unittest.main()
