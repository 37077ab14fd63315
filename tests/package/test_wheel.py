"""The wheel as a user gets it (scripts/test-wheel.sh builds it and runs this in CI): installed into a fresh venv
with pytest from PyPI, nothing else on the paths. Checks what it carries (the libraries a bare machine lacks, never
libcuda, libcupti or libcudart), that `gpumemtrace` and `python -m gpumemtrace` run from the venv, that
`gpumemtrace run --simulate` profiles a Python program exactly, and that `pytest --gpumemtrace` (the entry point)
fails a leaking test's marker naming the leaking line and passes a clean one (test_pytest_plugin.check_session).

GMT_WHEEL names the wheel; GMT_SAMPLES_DIR the CMake build's samples (optional: samples/leaky is profiled too)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import zipfile

from test_pytest_plugin import SESSION, check_session

HERE = os.path.dirname(os.path.abspath(__file__))
WHEEL = os.environ.get("GMT_WHEEL", "")
SAMPLES = os.environ.get("GMT_SAMPLES_DIR", "")
# What the profiled process or the analysis needs and a bare machine lacks: carried, renamed by auditwheel.
CARRIED = ("libdw", "libelf", "libunwind", "libsqlite3")  # fmt is compiled in (FMT_HEADER_ONLY)
NEVER_CARRIED = re.compile(r"(^|/)lib(cuda|cupti|cudart|nvidia-ml)[.-]")


@unittest.skipUnless(WHEEL, "GMT_WHEEL names no wheel (scripts/test-wheel.sh builds one)")
class WheelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory(prefix="gmt-wheel-")
        cls.venv = os.path.join(cls.folder.name, "venv")
        subprocess.run([sys.executable, "-m", "venv", cls.venv], check=True)
        cls.python = os.path.join(cls.venv, "bin", "python")
        subprocess.run([cls.python, "-m", "pip", "install", "-q", WHEEL, "pytest"], check=True)
        # A user's environment: the venv's bin first, none of the build tree's variables.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("GMT_") and k != "PYTHONPATH"}
        cls.env["PATH"] = os.path.join(cls.venv, "bin") + os.pathsep + os.environ.get("PATH", "")
        cls.env["PYTHONDONTWRITEBYTECODE"] = "1"

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def run_in_venv(self, *command, **kwargs):
        return subprocess.run(list(command), env=self.env, capture_output=True, text=True, timeout=600, **kwargs)

    def test_the_wheel_carries_its_libraries_and_no_cuda(self):
        name = os.path.basename(WHEEL)
        tag = re.search(r"-py3-none-manylinux_2_(\d+)_x86_64\.whl$", name)
        self.assertTrue(tag, name)
        self.assertLessEqual(int(tag.group(1)), 36, "newer than the GPU machine's glibc 2.39 allows? " + name)
        with zipfile.ZipFile(WHEEL) as wheel:
            files = wheel.namelist()
        carried = [f for f in files if f.startswith("gpumemtrace.libs/")]
        for library in CARRIED:
            self.assertTrue(any(os.path.basename(f).startswith(library) for f in carried), (library, carried))
        cuda = [f for f in files if NEVER_CARRIED.search(f)]
        # The one libcudart is the simulated runtime (a test fixture that `run --simulate` uses), not NVIDIA's.
        self.assertEqual(cuda, ["gpumemtrace/_native/lib/gpumemtrace/sim/libcudart.so.13"], cuda)
        for part in ("gpumemtrace/_native/bin/gpumemtrace", "gpumemtrace/_native/lib/gpumemtrace/libgpumemtrace.so",
                     "gpumemtrace/_native/lib/gpumemtrace/python/sitecustomize.py",
                     "gpumemtrace/_native/lib/gpumemtrace/python/gpumemtrace_inprocess/torch_bridge.cpp",
                     "gpumemtrace/pytest_plugin.py", "gpumemtrace/windows.py"):
            self.assertIn(part, files)

    def test_the_installed_binaries_find_every_library(self):
        site = self.run_in_venv(self.python, "-c", "import gpumemtrace; print(gpumemtrace.native_dir())")
        native = site.stdout.strip()
        for binary in ("bin/gpumemtrace", "lib/gpumemtrace/libgpumemtrace.so"):
            ldd = self.run_in_venv("ldd", os.path.join(native, binary))
            self.assertEqual(ldd.returncode, 0, ldd.stderr)
            self.assertNotIn("not found", ldd.stdout, ldd.stdout)
            self.assertIn("gpumemtrace.libs", ldd.stdout)  # the carried copies, not the build machine's

    def test_the_command_and_the_module_run(self):
        for command in (["gpumemtrace", "--version"], [self.python, "-m", "gpumemtrace", "--version"]):
            result = self.run_in_venv(*command)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertRegex(result.stdout, r"\d+\.\d+\.\d+", command)

    def test_run_simulate_profiles_a_python_program_exactly(self):
        trace = os.path.join(self.folder.name, "ctypes.db")
        app = os.path.join(HERE, "..", "python", "ctypes_app.py")
        run = self.run_in_venv("gpumemtrace", "run", "--simulate", "-q", "--force", "-o", trace, "--", self.python, app)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("truth: leaked_bytes=22000 leaked_allocations=6", run.stdout)
        report = json.loads(self.run_in_venv("gpumemtrace", "report", "--format", "json", trace).stdout)
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]), (22000, 6))
        self.assertTrue(report["trace"]["simulated"])
        # Python frames from the installed in-process package's interpreter layouts: the app's own lines.
        self.assertTrue(any(frame["python"] and frame["file"].endswith("ctypes_app.py")
                            for leak in report["leaks"] for frame in leak["stack"]), report["leaks"][0]["stack"])

    @unittest.skipUnless(SAMPLES and os.path.exists(os.path.join(SAMPLES, "leaky")), "no CMake build's samples")
    def test_run_simulate_profiles_the_leaky_sample(self):
        trace = os.path.join(self.folder.name, "leaky.db")
        run = self.run_in_venv("gpumemtrace", "run", "--simulate", "-q", "--force", "-o", trace, "--",
                               os.path.join(SAMPLES, "leaky"))
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(self.run_in_venv("gpumemtrace", "report", "--format", "json", trace).stdout)
        self.assertEqual(report["totals"]["leaked_bytes"], 5570560)

    def test_pytest_session_through_the_entry_point(self):
        trace_dir = os.path.join(self.folder.name, "pytest-traces")
        result = self.run_in_venv(self.python, "-m", "pytest", "--gpumemtrace", "--gpumemtrace-simulate",
                                  "--gpumemtrace-trace", trace_dir, "-p", "no:cacheprovider", "-rA", SESSION,
                                  cwd=SESSION)
        check_session(self, result, trace_dir)


if __name__ == "__main__":
    unittest.main()
