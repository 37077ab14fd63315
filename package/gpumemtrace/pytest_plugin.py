"""pytest plugin (entry point `pytest11`, so `pip install gpumemtrace` is enough): GPU memory per test.

    pytest --gpumemtrace [--gpumemtrace-trace DIR] [--gpumemtrace-simulate]

How it sees the memory: it re-executes the pytest command under `gpumemtrace run` (the preload library), because
only a preloaded library sees every CUDA allocation: loaded into a running pytest (in-process attach) its hooks
are not the process's own `cudaMalloc`/`dlsym` (they were bound before it came), and in a measured session of the
simulated runtime it saw 0 of the allocations (docs/pytest.md, "Why re-execute"). The re-executed pytest
(GMT_PYTEST_SESSION set) notes the CLOCK_MONOTONIC window of each test and of each fixture wider than a function,
and asks the CLI to analyze its own trace for each window (`report --since --until`: allocations made inside the
window, what is still live at its end counts as held). So the one reader of traces stays the C++ analyzer.

- Per test: memory allocated during the test (from the end of the wider fixtures it set up to the end of its
  teardown) and still held after it ended; session-, package-, module- and class-scoped fixtures are rows of their
  own (allocated during their setup, held at its end).
- `@pytest.mark.limit_gpu_leaks("1 MiB")`: the test fails when more than that, allocated during the test function,
  is still held when it returns; `@pytest.mark.limit_gpu_peak("2 GiB")`: when the live bytes of its allocations
  ever exceeded that. Tensor level where PyTorch's allocator is tracked, CUDA level otherwise (as `report`).
  The failure message carries the top stacks, the leaking line first.
- A session summary names the worst tests; `--gpumemtrace-trace DIR` keeps the traces (and the summary as JSON).
"""
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from . import native_command
from .windows import window_peak

SESSION_ENV = "GMT_PYTEST_SESSION"  # set in the re-executed pytest: the folder of its trace
TRACE_NAME = "pytest.{pid}.db"
# The library's writer thread writes what the hooks recorded at least every 200 ms (docs/trace-format.md): a window's
# events are in the trace this long after it ended.
FLUSH_WAIT_S = 0.5
SETTLE_S = 0.3
SETTLE_MAX_S = 10
REPORT_TIMEOUT_S = 300
LIMIT_MARKERS = ("limit_gpu_leaks", "limit_gpu_peak")
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2, "mb": 1000**2, "mib": 1 << 20,
          "g": 1000**3, "gb": 1000**3, "gib": 1 << 30, "t": 1000**4, "tb": 1000**4, "tib": 1 << 40}


def parse_size(text):
    """'1 MiB', '2GiB', '512 kB', 1048576 -> bytes. A bad size is a usage error, named with the text."""
    if isinstance(text, int) and text >= 0:
        return text
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise pytest.UsageError(f"gpumemtrace: '{text}' is not a size (e.g. 100, '512 KiB', '1 MiB', '2 GiB')")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_bytes(count):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(count) >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def pytest_addoption(parser):
    group = parser.getgroup("gpumemtrace", "GPU memory per test (gpumemtrace)")
    group.addoption("--gpumemtrace", action="store_true",
                    help="profile the session's GPU memory: re-runs pytest under `gpumemtrace run`, attributes memory "
                         "to each test, enforces the limit_gpu_leaks / limit_gpu_peak markers")
    group.addoption("--gpumemtrace-trace", metavar="DIR",
                    help="keep the session's traces (and gpumemtrace-pytest.json) in DIR; implies --gpumemtrace")
    group.addoption("--gpumemtrace-simulate", action="store_true",
                    help="run on gpumemtrace's simulated CUDA runtime (no GPU: a test fixture, memory only)")
    group.addoption("--gpumemtrace-top", type=int, default=5, metavar="N",
                    help="how many tests the session summary names (default 5)")


def pytest_configure(config):
    config.addinivalue_line("markers", "limit_gpu_leaks(size): with --gpumemtrace, fail when more than SIZE of the "
                                       "GPU memory the test allocated is still held when it returns")
    config.addinivalue_line("markers", "limit_gpu_peak(size): with --gpumemtrace, fail when the GPU memory the test "
                                       "allocated was ever more than SIZE at once")
    if os.environ.get(SESSION_ENV):
        config.pluginmanager.register(SessionProfiler(config, os.environ[SESSION_ENV]), "gpumemtrace-session")


def _wanted(config):
    return config.getoption("gpumemtrace") or config.getoption("gpumemtrace_trace")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """The pytest the user started: run the same command again under `gpumemtrace run`, and exit as it did."""
    if not _wanted(config) or os.environ.get(SESSION_ENV):
        return None
    keep = config.getoption("gpumemtrace_trace")
    directory = os.path.abspath(keep) if keep else tempfile.mkdtemp(prefix="gpumemtrace-pytest-")
    os.makedirs(directory, exist_ok=True)
    cli = native_command()
    if not os.access(cli, os.X_OK):
        raise pytest.UsageError(f"gpumemtrace: the gpumemtrace command is missing at '{cli}'; reinstall gpumemtrace")
    command = [cli, "run", "-q", "--force", "-o", os.path.join(directory, TRACE_NAME.format(pid="%p"))]
    if config.getoption("gpumemtrace_simulate"):
        command.append("--simulate")
    if not keep:
        command.append("--no-symbolize")  # the session's own reports read the symbols; nobody reads the trace after
    command += ["--", sys.executable, "-m", "pytest", *config.invocation_params.args]
    environment = dict(os.environ, **{SESSION_ENV: directory})
    try:
        code = subprocess.call(command, env=environment, cwd=str(config.invocation_params.dir))
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return code


class SessionProfiler:
    """Inside the re-executed pytest: the windows of tests and wide fixtures, and their analysis."""

    def __init__(self, config, directory):
        self.config = config
        self.directory = directory
        self.trace = os.path.join(directory, TRACE_NAME.format(pid=os.getpid()))
        self.cli = native_command()
        self.origin_ns = None  # the trace's start_monotonic_ns: --since/--until are relative to it
        self.rows = []  # {"name", "kind": "test"|"fixture", "start_ns", "end_ns"}
        self.call_windows = {}  # nodeid -> (start_ns, end_ns) of the test function itself
        self.wide_setup_end_ns = None  # the last wider-than-function fixture set up for the current test
        self.in_setup = False
        self.no_trace_yet = False  # settle() waited SETTLE_MAX_S for a trace that did not come

    # -- windows --------------------------------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        start = time.monotonic_ns()
        yield
        if fixturedef.scope != "function":
            end = time.monotonic_ns()
            self.rows.append({"name": f"{fixturedef.argname} ({fixturedef.scope} fixture)", "kind": "fixture",
                              "start_ns": start, "end_ns": end})
            if self.in_setup:  # pytest sets the wide ones up first; one the test body asks for stays in its window
                self.wide_setup_end_ns = end

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        self.in_setup = True
        yield
        self.in_setup = False

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        start = time.monotonic_ns()
        self.wide_setup_end_ns = None
        yield
        own_start = max(start, self.wide_setup_end_ns or start)
        self.rows.append({"name": item.nodeid, "kind": "test", "start_ns": own_start, "end_ns": time.monotonic_ns()})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        start = time.monotonic_ns()
        yield
        self.call_windows[item.nodeid] = (start, time.monotonic_ns())

    # -- markers ----------------------------------------------------------------------------------------------
    def pytest_collection_modifyitems(self, items):
        """A marker without one valid size stops the session before any test runs (pytest's usage error)."""
        for item in items:
            for name in LIMIT_MARKERS:
                for marker in item.iter_markers(name):
                    if len(marker.args) != 1 or marker.kwargs:
                        raise pytest.UsageError(f"gpumemtrace: {item.nodeid}: @pytest.mark.{name} takes one size, "
                                                f"e.g. @pytest.mark.{name}(\"1 MiB\")")
                    parse_size(marker.args[0])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when != "call" or not report.passed or item.nodeid not in self.call_windows:
            return
        limits = {name: parse_size(marker.args[0]) for name in LIMIT_MARKERS
                  for marker in [item.get_closest_marker(name)] if marker is not None}
        if not limits:
            return
        start, end = self.call_windows[item.nodeid]
        window = self.analyze(start, end, top=3)
        if window is None:
            report.outcome = "failed"
            report.longrepr = f"gpumemtrace: the test's GPU memory could not be analyzed: {self.last_error}"
            return
        problems = []
        held = window["totals"]["leaked_bytes"]
        peak, peak_stacks = window_peak(window)
        if "limit_gpu_leaks" in limits and held > limits["limit_gpu_leaks"]:
            problems.append(f"the test still holds {format_bytes(held)} ({held} B) of GPU memory it allocated, "
                            f"over its limit_gpu_leaks of {format_bytes(limits['limit_gpu_leaks'])}; largest first:"
                            + "".join(_describe_stack(leak) for leak in window["leaks"][:3]))
        if "limit_gpu_peak" in limits and peak > limits["limit_gpu_peak"]:
            stacks = [s for p in peak_stacks for s in p["stacks"]]
            problems.append(f"the test's GPU memory peaked at {format_bytes(peak)} ({peak} B), over its "
                            f"limit_gpu_peak of {format_bytes(limits['limit_gpu_peak'])}; held at the peak:"
                            + "".join(_describe_stack(s) for s in stacks[:3]))
        if problems:
            report.outcome = "failed"
            report.longrepr = "gpumemtrace: " + "\n\ngpumemtrace: ".join(problems) + f"\n(trace: {self.trace})"

    # -- analysis ---------------------------------------------------------------------------------------------
    last_error = ""

    def _report(self, *arguments):
        command = [self.cli, "report", "--format", "json", *arguments, self.trace]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=REPORT_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as error:
            self.last_error = str(error)
            return None
        if result.returncode != 0:
            self.last_error = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[0]
            return None
        return json.loads(result.stdout)

    def analyze(self, start_ns, end_ns, top=3, settled=False):
        """The report of one window: allocations made in it, held = still live at its end (None on failure).

        Unless the caller settled the trace already (settle()), it waits until the trace has stopped growing: the
        library's writer puts events into it at least every 200 ms, later on a loaded machine, and a window read
        too early would make a leak look smaller."""
        wait = FLUSH_WAIT_S - (time.monotonic_ns() - end_ns) / 1e9
        if wait > 0:
            time.sleep(wait)
        if not settled:
            self.settle(wait_s=0)
        if self.origin_ns is None:  # settle() found no trace: the process has made no CUDA allocation call
            return {"totals": {"leaked_bytes": 0, "peak_bytes": 0, "allocations": 0}, "leaks": [], "peak_stacks": []}
        since = max(0, start_ns - self.origin_ns) / 1e9
        until = max(0, end_ns - self.origin_ns) / 1e9
        return self._report("--top", str(top), "--since", f"{since:.9f}", "--until", f"{until:.9f}")

    def settle(self, wait_s=FLUSH_WAIT_S):
        """Waits until the trace exists with its start time (the library creates it, from its writer thread, at the
        process's first CUDA allocation call) and has stopped growing: two reads SETTLE_S apart count the same
        events. At most SETTLE_MAX_S: a process whose other threads keep allocating never stops growing."""
        time.sleep(wait_s)
        if self.origin_ns is None and self.no_trace_yet and not os.path.exists(self.trace):
            return  # waited once in vain: CUDA is loaded but nothing was allocated; do not wait at every test
        seen, deadline = None, time.monotonic() + SETTLE_MAX_S
        while time.monotonic() < deadline:
            whole = self._report("--top", "1") if os.path.exists(self.trace) else None
            if whole is not None and whole["trace"].get("start_monotonic_ns") is not None:
                self.origin_ns = whole["trace"]["start_monotonic_ns"]
                if whole["trace"]["event_count"] == seen:
                    return
                seen = whole["trace"]["event_count"]
            elif self.origin_ns is None and not self.cuda_used():
                return  # no trace, and no reason to expect one
            time.sleep(SETTLE_S)
        self.no_trace_yet = self.origin_ns is None

    @staticmethod
    def cuda_used():
        """Whether this process has a CUDA runtime or driver loaded: then its trace is coming."""
        with open("/proc/self/maps") as maps:
            return any("libcudart.so" in line or "libcuda.so" in line for line in maps)

    # -- summary ----------------------------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter):
        write = terminalreporter.write_line
        terminalreporter.section("gpumemtrace: GPU memory per test")
        if not os.path.exists(self.trace) and not self.cuda_used():
            write(f"no trace at {self.trace}: the session made no CUDA allocation call")
            return
        started = time.monotonic()
        rows = [r for r in self.rows if r["end_ns"] > r["start_ns"]]
        self.settle()
        if self.origin_ns is None:
            write(f"the trace {self.trace} could not be read: {self.last_error or 'it has no start time'}")
            return
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            reports = list(pool.map(lambda r: self.analyze(r["start_ns"], r["end_ns"], top=1, settled=True), rows))
        for row, report in zip(rows, reports):
            row["held_bytes"] = report["totals"]["leaked_bytes"] if report else None
            row["peak_bytes"] = window_peak(report)[0] if report else None
            row["allocations"] = report["totals"]["allocations"] if report else None
            row["held_at"] = _leaking_line(report["leaks"][0]) if report and report["leaks"] else None
        failed = [r for r in rows if r["held_bytes"] is None]
        tests = sorted((r for r in rows if r["kind"] == "test" and r["held_bytes"]),
                       key=lambda r: (-r["held_bytes"], -r["peak_bytes"]))
        fixtures = [r for r in rows if r["kind"] == "fixture" and (r["allocations"] or r["peak_bytes"])]
        top = self.config.getoption("gpumemtrace_top")
        if tests:
            write(f"tests still holding GPU memory they allocated when they ended ({len(tests)}), largest first:")
            for row in tests[:top]:
                write(f"  {format_bytes(row['held_bytes']):>12}  {row['name']}  (peak {format_bytes(row['peak_bytes'])}"
                      + (f", at {row['held_at']})" if row["held_at"] else ")"))
        else:
            write("no test still held GPU memory it allocated when it ended")
        worst_peaks = sorted((r for r in rows if r["kind"] == "test" and r["peak_bytes"]),
                             key=lambda r: -r["peak_bytes"])[:top]
        if worst_peaks:
            write("largest peaks: " + ", ".join(f"{r['name']} {format_bytes(r['peak_bytes'])}" for r in worst_peaks))
        for row in fixtures:
            write(f"  fixture {row['name']}: {format_bytes(row['held_bytes'])} held after its setup "
                  f"(peak {format_bytes(row['peak_bytes'])})")
        if failed:
            write(f"{len(failed)} windows could not be analyzed: {self.last_error}")
        write(f"{len(rows)} windows analyzed in {time.monotonic() - started:.1f} s; trace {self.trace}")
        if self.config.getoption("gpumemtrace_trace"):
            with open(os.path.join(self.directory, "gpumemtrace-pytest.json"), "w") as out:
                json.dump({"trace": self.trace, "origin_ns": self.origin_ns, "rows": rows}, out, indent=2)


def _leaking_line(item):
    """The innermost Python frame of a stack (the line that allocated, in a Python test), else the user's frame that
    `report` names (a native one)."""
    for frame in item.get("stack") or []:
        if frame.get("python") and frame.get("file"):
            return f"{frame.get('function') or '?'} {frame['file']}:{frame.get('line')}"
    return item.get("user_frame")


def _describe_stack(item):
    """One leak group or held stack: its size, the leaking line, and the stack as the text report shows it."""
    where = _leaking_line(item)
    lines = [f"\n  {format_bytes(item['bytes'])} in {item['count']} allocation(s)" + (f" at {where}" if where else "")]
    lines += [f"\n      {line}" for line in (item.get("stack_view") or [])[:8]]
    return "".join(lines)
