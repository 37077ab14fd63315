"""`pytest --gpumemtrace` from the source tree (package/ on PYTHONPATH, the build's CLI in GMT_CLI): the session
in session/ runs re-executed under `gpumemtrace run --simulate`; the leaking test fails its limit_gpu_leaks marker
naming its line, the peaking one its limit_gpu_peak marker, the clean one passes, and the summary names the worst
tests and the session fixture's row. test_wheel.py runs the same session from an installed wheel."""
import json
import os
import re
import subprocess
import tempfile
import unittest

from pytest_env import marker_line, python_with_pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SESSION = os.path.join(HERE, "session")
SOURCE = os.environ.get("GMT_SOURCE_DIR", os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("GMT_BUILD_DIR", "build")


def run_session(python, trace_dir, env=None, extra=()):
    command = [python, "-m", "pytest", "-p", "gpumemtrace.pytest_plugin", "--gpumemtrace", "--gpumemtrace-simulate",
               "--gpumemtrace-trace", trace_dir, "-p", "no:cacheprovider", "-rA", *extra, SESSION]
    return subprocess.run(command, cwd=SESSION, env=env, capture_output=True, text=True, timeout=600)


def check_session(test, result, trace_dir):
    """What every way of running the session must show (also used by test_wheel.py)."""
    out = result.stdout + result.stderr
    test.assertEqual(result.returncode, 1, out)  # pytest's "some tests failed"
    source = os.path.join(SESSION, "test_gpu_memory.py")
    leak_line, peak_line = marker_line(source, "LEAK-LINE"), marker_line(source, "PEAK-LINE")
    test.assertRegex(out, r"PASSED .*::test_clean_under_limits")
    test.assertRegex(out, r"PASSED .*::test_small_leak_without_marker")
    test.assertRegex(out, r"FAILED .*::test_leaks_over_limit")
    test.assertRegex(out, r"FAILED .*::test_peak_over_limit")
    # The leaking test's message: its held bytes, exactly, and the line that allocated them.
    test.assertIn("the test still holds 3.00 MiB (3145728 B) of GPU memory it allocated, over its limit_gpu_leaks "
                  "of 1.00 MiB", out)
    test.assertRegex(out, rf"3\.00 MiB in 1 allocation\(s\) at test_leaks_over_limit \S*test_gpu_memory\.py:{leak_line}\n")
    test.assertIn("the test's GPU memory peaked at 5.00 MiB (5242880 B), over its limit_gpu_peak of 2.00 MiB", out)
    test.assertRegex(out, rf"5\.00 MiB in 1 allocation\(s\) at test_peak_over_limit \S*test_gpu_memory\.py:{peak_line}\n")
    test.assertIn("2 failed, 2 passed", out)
    # The summary: the worst test first with its exact bytes, then the next; the session fixture as its own row.
    summary = out[out.index("gpumemtrace: GPU memory per test"):]
    held = re.findall(r"^\s+([0-9.]+ [KMG]iB)\s+(\S+)", summary, re.M)
    test.assertEqual([(size, name.split("::")[-1]) for size, name in held][:2],
                     [("3.00 MiB", "test_leaks_over_limit"), ("64.00 KiB", "test_small_leak_without_marker")], summary)
    test.assertIn("fixture workspace (session fixture): 2.00 MiB held after its setup", summary)
    # The traces stay in the folder asked for, with the rows as JSON.
    traces = [name for name in os.listdir(trace_dir) if name.startswith("pytest.") and name.endswith(".db")]
    test.assertEqual(len(traces), 1, os.listdir(trace_dir))
    with open(os.path.join(trace_dir, "gpumemtrace-pytest.json")) as f:
        rows = {row["name"].split("::")[-1]: row for row in json.load(f)["rows"]}
    test.assertEqual(rows["test_leaks_over_limit"]["held_bytes"], 3 * 1048576)
    test.assertEqual(rows["test_clean_under_limits"]["held_bytes"], 0)
    test.assertEqual(rows["test_clean_under_limits"]["peak_bytes"], 4 * 1048576)
    test.assertEqual(rows["workspace (session fixture)"]["held_bytes"], 2 * 1048576)


class PytestPluginTest(unittest.TestCase):
    def test_session_from_the_source_tree(self):
        python = python_with_pytest(BUILD)
        with tempfile.TemporaryDirectory(prefix="gmt-pytest-") as trace_dir:
            env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "package"), PYTHONDONTWRITEBYTECODE="1")
            result = run_session(python, trace_dir, env)
            check_session(self, result, trace_dir)

    def test_a_bad_size_is_a_usage_error(self):
        python = python_with_pytest(BUILD)
        with tempfile.TemporaryDirectory(prefix="gmt-pytest-") as folder:
            with open(os.path.join(folder, "test_bad.py"), "w") as f:
                f.write("import pytest\n\n@pytest.mark.limit_gpu_leaks('lots')\ndef test_x():\n    pass\n")
            env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE, "package"), PYTHONDONTWRITEBYTECODE="1")
            result = subprocess.run([python, "-m", "pytest", "-p", "gpumemtrace.pytest_plugin", "--gpumemtrace",
                                     "--gpumemtrace-simulate", "-p", "no:cacheprovider", folder],
                                    cwd=folder, env=env, capture_output=True, text=True, timeout=300)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("'lots' is not a size", result.stdout + result.stderr)


if __name__ == "__main__":
    unittest.main()
