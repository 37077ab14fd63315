"""Helpers for the end-to-end tests: run the real CLI on the real samples and read its JSON report.

Paths come from the environment that ctest sets (tests/e2e/CMakeLists.txt):
  GMT_CLI          the gpumemtrace executable under test
  GMT_SAMPLES_DIR  the built samples
  GMT_SOURCE_DIR   the source tree (to find LEAK-SITE markers in the samples)
"""
import json
import os
import re
import stat
import subprocess
import tempfile
import time
import unittest

CLI = os.environ.get("GMT_CLI", "gpumemtrace")
SAMPLES = os.environ.get("GMT_SAMPLES_DIR", "samples")
SOURCE = os.environ.get("GMT_SOURCE_DIR", ".")


def sample(name):
    return os.path.join(SAMPLES, name)


def line_of(path, marker):
    """The 1-based line of `marker` in the file at `path`."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if marker in line:
                return number
    raise AssertionError(f"marker {marker!r} not found in {path}")


def marker_line(sample_file, marker):
    """The 1-based line of `marker` (e.g. 'LEAK-SITE: load_weights') in samples/<sample_file>."""
    return line_of(os.path.join(SOURCE, "samples", sample_file), marker)


def run_cli(*args, cwd=None, env=None, timeout=300):
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([CLI, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def parse_truth(stdout):
    """The samples' own account of their leaks: 'truth: leaked_bytes=N leaked_allocations=M failed_allocations=K'."""
    found = re.findall(r"truth: leaked_bytes=(\d+) leaked_allocations=(\d+) failed_allocations=(\d+)", stdout)
    return [dict(leaked_bytes=int(b), leaked_allocations=int(a), failed_allocations=int(f)) for b, a, f in found]


def report_json(trace, *extra):
    result = run_cli("report", "--format", "json", *extra, trace)
    if result.returncode != 0:
        raise AssertionError(f"report failed ({result.returncode}): {result.stderr}")
    return json.loads(result.stdout)


def find_leak(report, function_name):
    """The leak group whose innermost frame is in `function_name`."""
    for leak in report["leaks"]:
        stack = leak["stack"]
        if stack and stack[0]["function"] and function_name in stack[0]["function"]:
            return leak
    names = [leak["stack"][0]["function"] if leak["stack"] else None for leak in report["leaks"]]
    raise AssertionError(f"no leak group with innermost frame {function_name}; innermost frames: {names}")


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def stop_run(app, timeout=30):
    """Ends a `gpumemtrace run` started with Popen as a user's Ctrl-C or an orchestrator would: SIGTERM, which run
    forwards to its app, then waits for both. SIGKILL only if that did not end it: a killed run leaves its app
    running on its own, and its temporary files for the next run to remove."""
    if app.poll() is None:
        app.terminate()
        try:
            app.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            app.kill()
    app.communicate()


def is_socket(path):
    """Whether `path` is a socket (a running process's control channel, `<trace>.ctl`)."""
    return os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode)


class TraceDirTestCase(unittest.TestCase):
    """A test case with a fresh working directory for traces."""

    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="gmt-e2e-")
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)
