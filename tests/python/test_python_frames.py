"""Python frames in allocation stacks: a CPython program that allocates through ctypes (GIL released, and
held with PyDLL), on the main thread and on two more, under the simulated runtime. The report's leak stacks
must carry the Python frames (file, function, exact line) in order, below the native frames of the call. Every
supported CPython (3.9-3.13) that pyenv has is run; one it does not support (3.6-3.8) must keep native stacks."""
import glob
import os
import sqlite3
import subprocess
import sys
import unittest

from gmt_e2e import TraceDirTestCase, find_leak, parse_truth, report_json, run_cli, sample

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctypes_app.py")
DEEP_APP = os.path.join(os.path.dirname(APP), "deep_app.py")
PYTHON = sys.executable


def minor_version(python):
    out = subprocess.run([python, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True)
    return int(out.stdout) if out.returncode == 0 else None


def interpreters(minors):
    """This interpreter and every other CPython 3.<minor> found in pyenv's versions, one per minor version."""
    found = {minor_version(PYTHON): PYTHON}
    for python in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3"))):
        minor = minor_version(python)
        found.setdefault(minor, python)
    return {minor: python for minor, python in found.items() if minor in minors}


SUPPORTED = interpreters({9, 10, 11, 12, 13})
UNSUPPORTED = interpreters({6, 7, 8})
SUPPORTED_LIST = "3.9, 3.10, 3.11, 3.12, 3.13"


def app_line(marker, app=APP):
    with open(app) as f:
        for number, line in enumerate(f, 1):
            if f"# PY-LEAK: {marker}" in line:
                return number
    raise AssertionError(f"marker {marker!r} not in {app}")


def function(qualified, minor):
    """The name a Python frame carries: the qualified name from 3.11, the code's plain name before (3.9 and 3.10
    code objects have no co_qualname)."""
    return qualified if minor >= 11 else qualified.rsplit(".", 1)[-1]


def python_frames(stack):
    return [(f["function"], f["file"], f["line"]) for f in stack if f["python"]]


def leak_of_size(report, total_bytes):
    for leak in report["leaks"]:
        if leak["bytes"] == total_bytes:
            return leak
    raise AssertionError(f"no leak group of {total_bytes} B: {[leak['bytes'] for leak in report['leaks']]}")


class PythonFramesTest(TraceDirTestCase):
    def run_app(self, *separator, env=None, python=PYTHON, app=APP, args=(), leaked_bytes=22000):
        version = os.path.basename(os.path.dirname(os.path.dirname(python)))
        trace = self.path(".".join([os.path.splitext(os.path.basename(app))[0], version, *args, "db"]))
        result = run_cli("run", "--simulate", "-o", trace, *separator, python, app, *args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("not supported", result.stderr)
        self.assertEqual(parse_truth(result.stdout)[0]["leaked_bytes"], leaked_bytes)
        return trace, report_json(trace)

    def test_leaks_name_the_python_lines_that_allocate(self):
        self.assertTrue(SUPPORTED, "no CPython 3.9-3.13 found")
        self.assertIn(minor_version(PYTHON), SUPPORTED)
        for minor, python in SUPPORTED.items():
            with self.subTest(python=f"3.{minor}"):
                self.check_leaks_name_the_python_lines(minor, python)

    def check_leaks_name_the_python_lines(self, minor, python):
        trace, report = self.run_app(python=python)  # `run python app.py`, without "--"
        totals = report["totals"]
        self.assertEqual((totals["allocations"], totals["frees"], totals["leaked_bytes"]), (11, 5, 22000))

        # Three leaks from one loop line: one group, the Python frames innermost first.
        model = leak_of_size(report, 3000)
        self.assertEqual(model["count"], 3)
        self.assertEqual(python_frames(model["stack"]), [
            ("cuda_malloc", APP, app_line("cuda_malloc")),
            (function("Layer.build", minor), APP, app_line("Layer.build")),
            ("build_model", APP, app_line("build_model")),
            ("main", APP, app_line("main.build_model")),
            ("<module>", APP, app_line("<module>")),
        ])
        # The native frames of the call (ctypes, libffi) stay above the Python frames; the interpreter's own
        # frames are gone, replaced by the Python frames.
        stack = model["stack"]
        first_python = next(i for i, f in enumerate(stack) if f["python"])
        self.assertGreater(first_python, 0)
        self.assertTrue(any("_ctypes" in (f["module"] or "") for f in stack[:first_python]), stack)
        for frame in stack:
            self.assertFalse(os.path.basename(frame["module"] or "").startswith("libpython"), frame)
            if frame["python"]:
                self.assertEqual(frame["module"], "python")
                self.assertEqual(frame["pc"], "0x0")

    def test_gil_held_call_and_threads(self):
        for minor, python in SUPPORTED.items():
            with self.subTest(python=f"3.{minor}"):
                self.check_gil_held_call_and_threads(minor, python)

    def check_gil_held_call_and_threads(self, minor, python):
        _, report = self.run_app("--", python=python)
        gil = next(leak for leak in report["leaks"] if leak["bytes"] == 3000 and leak["count"] == 1)
        self.assertEqual(python_frames(gil["stack"]), [
            ("cuda_malloc", APP, app_line("cuda_malloc")),
            ("leak_with_gil", APP, app_line("leak_with_gil")),
            ("main", APP, app_line("main.leak_with_gil")),
            ("<module>", APP, app_line("<module>")),
        ])
        # Each thread's stack holds its own frames (never the main thread's), up to threading's bootstrap.
        threads = leak_of_size(report, 16000)
        self.assertEqual(threads["count"], 2)
        frames = python_frames(threads["stack"])
        self.assertEqual(frames[:2], [("cuda_malloc", APP, app_line("cuda_malloc")),
                                      ("thread_worker", APP, app_line("thread_worker"))])
        bootstrap = ("Thread.run", "Thread._bootstrap_inner", "Thread._bootstrap")
        self.assertEqual([f[0] for f in frames[2:]], [function(name, minor) for name in bootstrap])
        self.assertTrue(all(f[1].endswith("threading.py") and f[2] > 0 for f in frames[2:]), frames)
        self.assertNotIn("main", [f[0] for f in frames])

    def test_deep_recursion_generator_native_callback_and_profile_hook(self):
        for minor, python in SUPPORTED.items():
            with self.subTest(python=f"3.{minor}"):
                self.check_deep_recursion_generator_and_native_callback(minor, python)

    def check_deep_recursion_generator_and_native_callback(self, minor, python):
        def line(marker):
            return app_line(marker, DEEP_APP)

        outer = [("<module>", DEEP_APP, line("<module>"))]
        innermost = [("cuda_malloc", DEEP_APP, line("cuda_malloc"))]
        for depth in (20, 70):
            _, report = self.run_app(python=python, app=DEEP_APP, args=(str(depth),), leaked_bytes=24000)
            # Every level of the recursion, each at its call line, as long as the stack has room: 64 entries, the
            # native frames of the call first. 20 levels fit with the outer frames; 70 fill the stack.
            stack = leak_of_size(report, 4000)["stack"]
            expected = (innermost + [("recurse", DEEP_APP, line("recurse.bottom"))]
                        + [("recurse", DEEP_APP, line("recurse"))] * depth
                        + [("main", DEEP_APP, line("main.recurse"))] + outer)
            first_python = next(i for i, f in enumerate(stack) if f["python"])
            if depth == 20:
                self.assertEqual(python_frames(stack), expected, stack)
            else:
                self.assertEqual(len(stack), 64)
                self.assertEqual(python_frames(stack), expected[:64 - first_python], stack)

        generator = leak_of_size(report, 5000)
        self.assertEqual(python_frames(generator["stack"]), innermost + [
            ("buffers", DEEP_APP, line("buffers")),
            ("main", DEEP_APP, line("main.buffers")),
        ] + outer)

        # The callback's Python frames, then libc's qsort (and ctypes' native frames), then the Python frames
        # that called qsort: each run of Python frames in its place among the native ones.
        stack = leak_of_size(report, 6000)["stack"]
        self.assertEqual(python_frames(stack), innermost + [
            ("compare", DEEP_APP, line("compare")),
            ("sort_with_callback", DEEP_APP, line("sort_with_callback")),
            ("main", DEEP_APP, line("main.sort_with_callback")),
        ] + outer)
        names = [f["function"] if f["python"] else None for f in stack]
        between = stack[names.index("compare") + 1:names.index("sort_with_callback")]
        self.assertTrue(between and not any(f["python"] for f in between), stack)
        self.assertTrue(any("qsort" in (f["function"] or "") for f in between), between)

        # A frame whose call a profile hook sees has run no instruction yet: it is shown on its first line (the
        # def), as CPython shows it, in every version.
        self.assertEqual(python_frames(leak_of_size(report, 7000)["stack"]), innermost + [
            ("profile_hook", DEEP_APP, line("profile_hook")),
            ("profiled", DEEP_APP, line("profiled")),
            ("call_profiled", DEEP_APP, line("call_profiled")),
            ("main", DEEP_APP, line("main.call_profiled")),
        ] + outer)

        # Every call of a specialized __init__ in one group: 3.13's shim frame (CALL_ALLOC_AND_ENTER_INIT) never shows.
        init = leak_of_size(report, 2000)
        self.assertEqual(init["count"], 20)
        self.assertEqual(python_frames(init["stack"]), innermost + [
            (function("Buffer.__init__", minor), DEEP_APP, line("Buffer.__init__")),
            ("main", DEEP_APP, line("main.Buffer")),
        ] + outer)

    def test_trace_stores_python_frames_in_their_table(self):
        trace, _ = self.run_app()
        with sqlite3.connect(trace) as db:
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 13)  # schema/trace_schema.h
            rows = db.execute("SELECT fn.text, fl.text, p.line FROM python_frames p JOIN strings fn ON fn.id = "
                              "p.function_id JOIN strings fl ON fl.id = p.file_id").fetchall()
            self.assertIn(("Layer.build", APP, app_line("Layer.build")), rows)
            # A Python frame has no pc; a native frame no python frame.
            self.assertEqual(db.execute("SELECT count(*) FROM stack_frames WHERE python_frame_id != 0 AND pc != 0")
                             .fetchone()[0], 0)
            self.assertGreater(db.execute("SELECT count(*) FROM stack_frames WHERE python_frame_id != 0")
                               .fetchone()[0], 0)
            self.assertEqual(db.execute("SELECT count(*) FROM symbols WHERE pc = 0").fetchone()[0], 0)

    def test_switch_off_keeps_native_stacks(self):
        _, report = self.run_app(env={"GMT_NO_PYTHON_FRAMES": "1"})
        for leak in report["leaks"]:
            self.assertEqual(python_frames(leak["stack"]), [])
        self.assertEqual(report["totals"]["leaked_bytes"], 22000)


    def test_unsupported_version_says_so_once_and_keeps_native_stacks(self):
        if not UNSUPPORTED:
            self.skipTest("no CPython 3.6, 3.7 or 3.8 installed")
        for minor, python in UNSUPPORTED.items():
            with self.subTest(python=f"3.{minor}"):
                trace = self.path(f"unsupported.{minor}.db")
                result = run_cli("run", "--simulate", "-o", trace, python, APP)
                self.assertEqual(result.returncode, 0, result.stderr)
                note = f"Python frames are not supported on CPython 3.{minor} (supported: {SUPPORTED_LIST})"
                self.assertEqual(result.stderr.count(note), 1, result.stderr)
                report = report_json(trace)
                self.assertEqual(report["totals"]["leaked_bytes"], 22000)
                for leak in report["leaks"]:
                    self.assertEqual(python_frames(leak["stack"]), [])

    def test_free_threaded_build_says_so_once_and_keeps_native_stacks(self):
        # A free-threaded CPython (3.13t) lays its objects out otherwise: recognized by its marker symbol, here
        # preloaded (a test fixture) into the newest supported interpreter, which is built with the GIL.
        minor, python = max(SUPPORTED.items())
        trace = self.path("free-threaded.db")
        # After what is preloaded already (a sanitizer's runtime must stay first).
        preload = [os.environ.get("LD_PRELOAD"), os.environ["FAKE_FREE_THREADED_LIBRARY"]]
        env = {"LD_PRELOAD": ":".join(p for p in preload if p)}
        result = run_cli("run", "--simulate", "-o", trace, python, APP, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        note = f"Python frames are not supported on free-threaded CPython 3.{minor} (supported: {SUPPORTED_LIST}, " \
               "with the GIL)"
        self.assertEqual(result.stderr.count(note), 1, result.stderr)
        report = report_json(trace)
        self.assertEqual(report["totals"]["leaked_bytes"], 22000)
        for leak in report["leaks"]:
            self.assertEqual(python_frames(leak["stack"]), [])


class LauncherTest(TraceDirTestCase):
    def test_worker_processes_of_a_launcher_get_python_frames(self):
        # `gpumemtrace run -- torchrun ...`: each worker the launcher starts gets its own trace with its frames.
        launcher = os.path.join(os.path.dirname(APP), "launcher.py")
        trace = self.path("launch.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", PYTHON, launcher, "2", APP)
        self.assertEqual(result.returncode, 0, result.stderr)
        workers = [p for p in glob.glob(self.path("launch.*.db"))]
        self.assertEqual(len(workers), 2, os.listdir(self.dir))
        for worker in workers:
            report = report_json(worker)
            self.assertEqual(report["totals"]["leaked_bytes"], 22000)
            model = leak_of_size(report, 3000)
            self.assertEqual(python_frames(model["stack"])[1], ("Layer.build", APP, app_line("Layer.build")))
        self.assertEqual(report_json(trace)["totals"]["allocations"], 0)  # the launcher itself


class NativeAppTest(TraceDirTestCase):
    def test_program_without_python_has_no_python_frames(self):
        trace = self.path("leaky.db")
        result = run_cli("run", "--simulate", "-o", trace, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        self.assertTrue(report["leaks"])
        for leak in report["leaks"]:
            self.assertTrue(all(not f["python"] for f in leak["stack"]), leak["stack"])
        find_leak(report, "load_weights")
        with sqlite3.connect(trace) as db:
            self.assertEqual(db.execute("SELECT count(*) FROM python_frames").fetchone()[0], 0)
            self.assertEqual(db.execute("SELECT count(*) FROM stack_frames WHERE python_frame_id != 0")
                             .fetchone()[0], 0)


if __name__ == "__main__":
    unittest.main()
