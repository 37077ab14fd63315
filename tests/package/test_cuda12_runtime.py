"""The CUDA 12 runtime without a GPU: tests/gpu/cuda12_app.cpp built as a library against PyPI's
nvidia-cuda-runtime-cu12 and opened with RTLD_LOCAL (tests/gpu/cuda12_loader.cpp), as Python opens an extension
module, so that its libcudart.so.12 is outside the global scope where the preloaded hooks look for the real runtime.
Under `gpumemtrace run` the app must get the real runtime's answer, exactly as unprofiled (here, with no driver:
"CUDA driver version is insufficient", exit 2), never a stand-in error from a hook that found no runtime
(interpose/real_functions.cpp looks for libcudart.so.13, then .12). The wheel comes from PyPI once into the build
folder. On a GPU, gpu.cuda12 checks the same builds' leaks exactly."""
import glob
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GMT_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("GMT_BUILD_DIR", "build"))
CLI = os.environ.get("GMT_CLI", "gpumemtrace")


def cuda12_runtime():
    """nvidia-cuda-runtime-cu12, unpacked in the build folder (downloaded from PyPI the first time)."""
    folder = os.path.join(BUILD, "cuda12-runtime")
    runtime = os.path.join(folder, "nvidia", "cuda_runtime")
    if not os.path.exists(os.path.join(runtime, "lib", "libcudart.so.12")):
        wheels = os.path.join(folder, "wheels")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", wheels,
                        "nvidia-cuda-runtime-cu12"], check=True)
        with zipfile.ZipFile(sorted(glob.glob(os.path.join(wheels, "*.whl")))[-1]) as wheel:
            wheel.extractall(folder)
    return runtime


class Cuda12RuntimeLocalTest(unittest.TestCase):
    def test_the_app_gets_the_real_runtimes_answer(self):
        runtime = cuda12_runtime()
        with tempfile.TemporaryDirectory(prefix="gmt-cuda12-") as folder:
            library, loader = os.path.join(folder, "libcuda12_app.so"), os.path.join(folder, "cuda12_loader")
            subprocess.run(["g++", "-std=c++17", "-O1", "-g", os.path.join(SOURCE, "tests", "gpu", "cuda12_app.cpp"),
                            f"-I{runtime}/include", "-DGMT_CUDA12_APP_LIBRARY", "-shared", "-fPIC",
                            f"-L{runtime}/lib", "-l:libcudart.so.12", f"-Wl,-rpath,{runtime}/lib", "-o", library],
                           check=True)
            subprocess.run(["g++", "-std=c++17", "-O1", os.path.join(SOURCE, "tests", "gpu", "cuda12_loader.cpp"),
                            "-ldl", "-o", loader], check=True)
            plain = subprocess.run([loader, library], capture_output=True, text=True, timeout=120)
            self.assertIn("cudart 12", plain.stdout)
            trace = os.path.join(folder, "cuda12.db")
            profiled = subprocess.run([CLI, "run", "-q", "--backend", "hooks", "-o", trace, "--", loader, library],
                                      capture_output=True, text=True, timeout=120)
        self.assertEqual((profiled.returncode, profiled.stdout), (plain.returncode, plain.stdout))
        # The first runtime call the app checks, answered by the real libcudart.so.12 both times.
        first_error = plain.stderr.splitlines()[0] if plain.returncode else ""
        self.assertIn(first_error, profiled.stderr)
        self.assertNotIn("initialization error", profiled.stderr)


if __name__ == "__main__":
    unittest.main()
