"""`cmake --install` puts the CLI, the preload library, the simulated runtime and the docs in place, and the
installed CLI finds its library relative to itself."""
import os
import subprocess
import unittest

from gmt_e2e import TraceDirTestCase, report_json, sample

BUILD_DIR = os.environ.get("GMT_BUILD_DIR", "build")


class InstallTest(TraceDirTestCase):
    def test_installed_tree_profiles_a_sample(self):
        prefix = self.path("prefix")
        result = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix], capture_output=True,
                                text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        for relative in ("bin/gpumemtrace", "lib/gpumemtrace/libgpumemtrace.so",
                         "lib/gpumemtrace/sim/libcudart.so.13", "share/doc/gpumemtrace/README.md",
                         "lib/gpumemtrace/python/sitecustomize.py",
                         # compiled against the app's torch at run time (python/gpumemtrace_inprocess/torch_tracker.py)
                         "lib/gpumemtrace/python/gpumemtrace_inprocess/torch_bridge.cpp",
                         "share/doc/gpumemtrace/trace-format.md"):
            self.assertTrue(os.path.exists(os.path.join(prefix, relative)), relative)

        cli = os.path.join(prefix, "bin", "gpumemtrace")
        trace = self.path("installed.db")
        run = subprocess.run([cli, "run", "--simulate", "-q", "-o", trace, "--", sample("leaky")],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        report = subprocess.run([cli, "report", "--format", "json", trace], capture_output=True, text=True)
        self.assertEqual(report.returncode, 0, report.stderr)
        self.assertIn('"leaked_bytes": 5570560', report.stdout)


if __name__ == "__main__":
    unittest.main()
