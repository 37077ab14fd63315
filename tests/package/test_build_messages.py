"""A missing build dependency stops CMake's configure (and so `pip install .`) with one message that names every
missing library and the Debian packages to install (cmake/dependencies.cmake). Here two are hidden from CMake."""
import os
import subprocess
import tempfile
import unittest

SOURCE = os.environ.get("GMT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


class MissingDependencyTest(unittest.TestCase):
    def test_one_message_names_the_debian_packages(self):
        with tempfile.TemporaryDirectory(prefix="gmt-configure-") as build:
            result = subprocess.run(["cmake", "-S", SOURCE, "-B", build, "-G", "Ninja",
                                     "-DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON", "-DCMAKE_DISABLE_FIND_PACKAGE_fmt=ON"],
                                    capture_output=True, text=True, timeout=300)
        out = result.stdout + result.stderr
        self.assertNotEqual(result.returncode, 0, out)
        self.assertIn("gpumemtrace cannot be built; missing:", out)
        self.assertIn("- SQLite 3 (sqlite3.h)", out)
        self.assertIn("- fmt", out)
        self.assertIn("On Debian or Ubuntu: sudo apt-get install libsqlite3-dev libfmt-dev", out)
        self.assertEqual(out.count("CMake Error"), 1, out)  # one message, not one per missing library


if __name__ == "__main__":
    unittest.main()
