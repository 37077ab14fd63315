"""The wheel on the GPU machine (issue 39): scripts/gpu-prepare.sh builds and repairs it here and carries it in
.gpu/wheels with pytest's wheels; this installs it into a fresh venv (the machine's torch seen through
--system-site-packages, nothing from a registry) and, with the Debian packages that gpu-suite.sh unpacks kept off
every path, profiles samples/leaky exactly, profiles a PyTorch program at tensor level, and runs a PyTorch pytest
session in which the leaking test fails its marker at its line and the clean one passes. Skips (exit 77) without a GPU;
fails without the carried wheel."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import SOURCE, sample  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WHEELS = os.path.join(SOURCE, ".gpu", "wheels")
SESSION = os.path.join(HERE, "torch_session")
PYTHON = os.environ.get("GMT_PYTHON", sys.executable)  # the suite's Python: the one that has torch, if any
DEBIAN_PREFIX = "/tmp/gmt-prefix"  # scripts/gpu-suite.sh's unpacked Debian packages: never seen by the wheel


def line_of(path, marker):
    with open(path) as f:
        return next(number for number, line in enumerate(f, 1) if marker in line)


class GpuWheelTest(unittest.TestCase):
    figures = []

    @classmethod
    def setUpClass(cls):
        wheels = glob.glob(os.path.join(WHEELS, "gpumemtrace-*.whl"))
        if not wheels:
            raise AssertionError(f"no gpumemtrace wheel in {WHEELS}: run scripts/gpu-prepare.sh before the GPU run")
        cls.folder = tempfile.TemporaryDirectory(prefix="gmt-gpu-wheel-")
        venv = os.path.join(cls.folder.name, "venv")
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True)
        cls.python = os.path.join(venv, "bin", "python")
        # The machine's torch may live in a venv of its own (the suite's Python), which --system-site-packages does
        # not reach: a .pth line lets the fresh venv import that torch, and only that (no gpumemtrace there).
        torch_home = subprocess.run([sys.executable, "-c", "import os, torch; print(os.path.dirname(os.path.dirname("
                                     "torch.__file__)))"], capture_output=True, text=True)
        if torch_home.returncode == 0 and not have_torch_cuda(cls.python):
            site = subprocess.run([cls.python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            with open(os.path.join(site, "machine-torch.pth"), "w") as f:
                f.write(torch_home.stdout.strip() + "\n")
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("GMT_") and k != "PYTHONPATH"}
        paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p and DEBIAN_PREFIX not in p]
        cls.env["LD_LIBRARY_PATH"] = ":".join(paths)
        cls.env["PATH"] = os.path.join(venv, "bin") + os.pathsep + os.environ.get("PATH", "")
        cls.env["GMT_TORCH_BRIDGE_CACHE"] = os.path.join(cls.folder.name, "bridge-cache")
        subprocess.run([cls.python, "-m", "pip", "install", "-q", "--no-index", "--find-links", WHEELS,
                        wheels[0], "pytest"], check=True, env=cls.env)
        cls.figures.append(f"installed {os.path.basename(wheels[0])} into a fresh venv")

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()
        for line in cls.figures:
            print("FIGURE", line)

    def run_in_venv(self, *command, cwd=None):
        return subprocess.run(list(command), env=self.env, cwd=cwd, capture_output=True, text=True, timeout=900)

    def test_no_debian_package_is_used(self):
        native = self.run_in_venv(self.python, "-c", "import gpumemtrace; print(gpumemtrace.native_dir())").stdout
        for binary in ("bin/gpumemtrace", "lib/gpumemtrace/libgpumemtrace.so"):
            ldd = self.run_in_venv("ldd", os.path.join(native.strip(), binary)).stdout
            self.assertNotIn("not found", ldd)
            self.assertNotIn(DEBIAN_PREFIX, ldd)

    def test_cuda_sample_exact(self):
        trace = os.path.join(self.folder.name, "leaky.db")
        run = self.run_in_venv("gpumemtrace", "run", "-q", "--force", "-o", trace, "--", sample("leaky"))
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(self.run_in_venv("gpumemtrace", "report", "--format", "json", trace).stdout)
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]), (5570560, 6))
        self.assertFalse(report["trace"]["simulated"])
        self.figures.append(f"wheel: samples/leaky 5570560 B in 6 exact under {report['trace']['backend']}")

    def test_pytorch_program_at_tensor_level(self):
        if not have_torch_cuda(self.python):
            self.skipTest("no PyTorch with CUDA in this Python")
        program = os.path.join(self.folder.name, "keep.py")
        with open(program, "w") as f:
            f.write("import torch\nscratch = torch.ones(1 << 20, device='cuda')\ndel scratch\n"
                    "kept = torch.empty(48 << 20, dtype=torch.uint8, device='cuda')  # KEPT\n"
                    "torch.cuda.synchronize()\n")
        trace = os.path.join(self.folder.name, "torch.db")
        run = self.run_in_venv("gpumemtrace", "run", "-q", "--force", "-o", trace, "--", self.python, program)
        self.assertEqual(run.returncode, 0, run.stderr)
        report = json.loads(self.run_in_venv("gpumemtrace", "report", "--format", "json", trace).stdout)
        top = report["leaks"][0]
        self.assertEqual(top["bytes"], 48 << 20, run.stderr)
        where = top["python_line"] or top["user_frame"] or ""  # "/path/keep.py:<module>:4"
        self.assertRegex(where, rf"keep\.py:(<module>:)?{line_of(program, 'KEPT')}$")
        self.figures.append(f"wheel: PyTorch program's kept tensor {top['bytes']} B at {top['python_line']}")

    def test_pytest_markers_with_pytorch(self):
        if not have_torch_cuda(self.python):
            self.skipTest("no PyTorch with CUDA in this Python")
        traces = os.path.join(self.folder.name, "pytest-traces")
        result = self.run_in_venv(self.python, "-m", "pytest", "--gpumemtrace", "--gpumemtrace-trace", traces,
                                  "-p", "no:cacheprovider", "-rA", SESSION, cwd=SESSION)
        out = result.stdout + result.stderr
        source = os.path.join(SESSION, "test_torch_memory.py")
        self.assertEqual(result.returncode, 1, out)
        self.assertRegex(out, r"FAILED .*::test_keeps_a_tensor")
        self.assertRegex(out, r"PASSED .*::test_frees_its_tensors")
        self.assertRegex(out, r"FAILED .*::test_peaks_over_its_limit")
        self.assertIn("the test still holds 16.00 MiB (16777216 B) of GPU memory it allocated", out)
        self.assertIn(f"test_torch_memory.py:{line_of(source, 'LEAK-LINE')}", out)
        self.assertIn(f"test_torch_memory.py:{line_of(source, 'PEAK-LINE')}", out)
        self.figures.append("wheel: pytest --gpumemtrace with PyTorch: the kept tensor's test fails naming its line, "
                            "the clean test passes, the peak marker fails")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); the GPU suite runs on the H200 via "
              "scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
