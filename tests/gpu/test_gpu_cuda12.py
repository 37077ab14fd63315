"""CUDA 12 (issue 39): tests/gpu/cuda12_app.cpp, built by g++ against PyPI's CUDA 12 runtime wheel
(nvidia-cuda-runtime-cu12: its shared libcudart.so.12 and its libcudart_static.a, and as a library that
tests/gpu/cuda12_loader.cpp opens with RTLD_LOCAL, where the hooks find the runtime only through its soname), is
profiled exactly under every backend: auto, hooks, cupti with the toolkit's CUPTI 13, and cupti with the CUPTI 12 of nvidia-cuda-cupti-cu12
(GMT_CUPTI_LIBRARY; the loader's log shows which libcupti the process opened). Each equals the program's own count,
each leak site is named at its line, and compute-sanitizer's leak check agrees.

The wheels travel with the tree in .gpu/wheels (scripts/gpu-prepare.sh downloads them: the GPU machine has no package
registry). Skips (exit 77) without a GPU; fails when the wheels are missing."""
import glob
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import SOURCE, TraceDirTestCase, find_leak, parse_truth, report_json, run_cli  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, sanitizer_leaks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WHEELS = os.environ.get("GMT_CUDA12_WHEELS", os.path.join(SOURCE, ".gpu", "wheels"))
APP = os.path.join(HERE, "cuda12_app.cpp")
LOADER = os.path.join(HERE, "cuda12_loader.cpp")
SITES = {"keep_weights": (8 << 20, 2), "keep_async_scratch": (3 << 20, 1), "keep_managed": (1 << 20, 1)}
# (name, --backend, use the wheel's CUPTI 12)
VARIANTS = (("auto", "auto", False), ("hooks", "hooks", False), ("cupti13", "cupti", False),
            ("cupti12", "cupti", True))


def marker_line(marker):
    with open(APP) as f:
        return next(number for number, line in enumerate(f, 1) if marker in line)


class Cuda12Test(TraceDirTestCase):
    figures = []

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="gmt-cuda12-")
        root = cls.work.name
        wheels = {}
        for package in ("nvidia_cuda_runtime_cu12", "nvidia_cuda_cupti_cu12"):
            found = sorted(glob.glob(os.path.join(WHEELS, f"{package}-*.whl")))
            if not found:
                raise AssertionError(f"no {package} wheel in {WHEELS}: run scripts/gpu-prepare.sh before the GPU run")
            with zipfile.ZipFile(found[-1]) as wheel:
                wheel.extractall(root)
            wheels[package] = os.path.basename(found[-1])
        runtime = os.path.join(root, "nvidia", "cuda_runtime")
        cls.cupti12 = os.path.join(root, "nvidia", "cuda_cupti", "lib", "libcupti.so.12")
        shared, static = os.path.join(root, "app_shared"), os.path.join(root, "app_static")
        library, loader = os.path.join(root, "libcuda12_app.so"), os.path.join(root, "cuda12_loader")
        cls.apps = {"shared": [shared], "static": [static], "rtld_local": [loader, library]}
        flags = ["g++", "-std=c++17", "-O1", "-g", APP, f"-I{runtime}/include"]
        link_shared = [f"-L{runtime}/lib", "-l:libcudart.so.12", f"-Wl,-rpath,{runtime}/lib"]
        subprocess.run([*flags, *link_shared, "-o", shared], check=True)
        subprocess.run([*flags, f"{runtime}/lib/libcudart_static.a", "-ldl", "-lpthread", "-lrt", "-o", static],
                       check=True)
        subprocess.run([*flags, "-DGMT_CUDA12_APP_LIBRARY", "-shared", "-fPIC", *link_shared, "-o", library],
                       check=True)
        subprocess.run(["g++", "-std=c++17", "-O1", LOADER, "-ldl", "-o", loader], check=True)
        cls.figures.append(f"built with g++ against {wheels['nvidia_cuda_runtime_cu12']} (shared and static cudart); "
                           f"CUPTI 12 from {wheels['nvidia_cuda_cupti_cu12']}")

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()
        for line in cls.figures:
            print("FIGURE", line)

    def test_the_apps_use_the_cuda12_runtime(self):
        ldd = subprocess.run(["ldd", self.apps["shared"][0]], capture_output=True, text=True).stdout
        self.assertRegex(ldd, r"libcudart\.so\.12 => .*nvidia/cuda_runtime/lib/libcudart\.so\.12")
        static = subprocess.run(["ldd", self.apps["static"][0]], capture_output=True, text=True).stdout
        self.assertNotIn("libcudart", static)
        for linkage, app in self.apps.items():
            out = subprocess.run(app, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertRegex(out.stdout, r"cudart 12\d{3}", linkage)

    def test_exact_under_every_backend(self):
        line = {site: marker_line(f"LEAK-SITE: {site}") for site in SITES}
        for linkage, app in self.apps.items():
            reference = sanitizer_leaks(app)
            for name, backend, cupti12 in VARIANTS:
                with self.subTest(linkage=linkage, variant=name):
                    trace = self.path(f"{linkage}-{name}.db")
                    env = {}
                    loader_log = self.path(f"ld-{linkage}-{name}")
                    if cupti12:
                        env = {"GMT_CUPTI_LIBRARY": self.cupti12, "LD_DEBUG": "files", "LD_DEBUG_OUTPUT": loader_log}
                    result = run_cli("run", "--backend", backend, "-o", trace, "--", *app, env=env)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    truth = parse_truth(result.stdout)[0]
                    report = report_json(trace)
                    self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                                     (truth["leaked_bytes"], truth["leaked_allocations"]), result.stderr)
                    self.assertEqual(report["trace"]["backend"], "hooks" if backend == "auto" else backend)
                    for site, (size, count) in SITES.items():
                        leak = find_leak(report, site)
                        self.assertEqual((leak["bytes"], leak["count"]), (size, count), site)
                        self.assertEqual(leak["stack"][0]["line"], line[site], site)
                    if reference is not None:
                        self.assertEqual(reference, (truth["leaked_bytes"], truth["leaked_allocations"]))
                    if cupti12:
                        opened = "".join(open(f).read() for f in glob.glob(loader_log + ".*"))
                        self.assertIn(f"file={self.cupti12}", opened)
                        # Our loader first asks whether the app already has a CUPTI (dlopen with RTLD_NOLOAD of
                        # libcupti.so.13 and .12), which the loader's log names too ("file=libcupti.so.13 ...
                        # dynamically loaded by"); a library actually loaded gets a link map and its init called.
                        loaded_13 = [entry for entry in opened.splitlines() if "libcupti.so.13" in entry and
                                     ("generating link map" in entry or "calling init" in entry)]
                        self.assertIn(f"calling init: {self.cupti12}", opened)
                        self.assertEqual(loaded_13, [])
            self.figures.append(f"cuda12 {linkage}: {truth['leaked_bytes']} B in {truth['leaked_allocations']} "
                                f"leaks exact under {', '.join(v[0] for v in VARIANTS)}"
                                + (f"; compute-sanitizer {reference}" if reference else ""))


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); the GPU suite runs on the H200 via "
              "scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
