"""Helpers for the reliability tests (on top of tests/e2e/gmt_e2e.py, which is on PYTHONPATH)."""
import os
import re
import signal
import subprocess
import time

from gmt_e2e import CLI, run_cli, sample

BUILD = os.environ.get("GMT_BUILD_DIR", "build")
RELIABILITY_BIN = os.environ.get("GMT_RELIABILITY_BIN", os.path.join(BUILD, "tests", "reliability"))
PRELOAD = os.path.join(os.path.dirname(CLI), "..", "lib", "gpumemtrace", "libgpumemtrace.so")
SIM_DIR = os.path.join(os.path.dirname(CLI), "..", "lib", "gpumemtrace", "sim")


def parse_early(stdout):
    m = re.search(r"early: leaked_bytes=(\d+) leaked_allocations=(\d+)", stdout)
    assert m, f"no early line in {stdout!r}"
    return int(m.group(1)), int(m.group(2))


def sim_env(**extra):
    """The environment for running a sample on the simulated runtime without the profiler."""
    env = dict(os.environ, LD_LIBRARY_PATH=SIM_DIR, GMT_SIM_QUIET="1")
    env.update(extra)
    return env


def preload_env(trace, **extra):
    """As sim_env, with the preload library loaded by hand (no CLI) writing `trace`."""
    return sim_env(LD_PRELOAD=PRELOAD, GMT_OUTPUT=trace, GMT_SIMULATED="1", GMT_BACKEND="runtime", **extra)


def child_pid_of(pid, timeout=10.0):
    """The pid of the (only) child of process `pid`: the app that `gpumemtrace run` started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    children = f.read().split()
                if children:
                    return int(children[0])
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    raise AssertionError(f"process {pid} started no child within {timeout} s")


def start_cli_run(trace, *command, env=None):
    """`gpumemtrace run --simulate -q -o trace -- command...` in the background, stdout piped."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.Popen([CLI, "run", "--simulate", "-q", "-o", trace, "--", *command], env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(process, text, timeout=20.0):
    """Reads the process's stdout until a line containing `text` (the app says it is running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"stdout closed before {text!r}")
        if text in line:
            return
    raise AssertionError(f"no {text!r} within {timeout} s")


__all__ = ["CLI", "run_cli", "sample", "signal", "parse_early", "sim_env", "preload_env", "child_pid_of",
           "start_cli_run", "wait_for_line", "RELIABILITY_BIN", "PRELOAD", "SIM_DIR"]
