"""Watching and steering a running PyTorch service on the GPU (issue 36): samples/torch_serving.py under `run` (one KV
buffer in 500 requests kept forever at keep_kv's torch.empty line), a `ctl snapshot` taken while it serves, `report
--at` that snapshot and `top --once` read from the running process, both naming the leaking line; then what `top`
costs the service: requests/s while `top` refreshes every second beside it against the windows of the same run
without it, for a full and an aggregate trace. Prints FIGURE lines for docs/gpu-results.md. Exits 77 without a GPU;
the cases skip without PyTorch with CUDA."""
import os
import re
import shutil
import stat
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, report_json, run_cli, stop_run  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "bench"))
import serving_windows  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SCRIPT = os.path.join(SOURCE, "samples", "torch_serving.py")
LEAK_EVERY = 500


def wait_for_socket(path, app, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode):
            return
        if app.poll() is not None:
            raise AssertionError(f"the service ended before its trace's socket appeared: {app.communicate()}")
        time.sleep(0.1)
    raise AssertionError(f"no {path} after {timeout} s")


def served(stdout):
    found = re.search(r"served: requests=(\d+) seconds=([\d.]+) requests_per_s=([\d.]+)", stdout)
    assert found, stdout
    return int(found.group(1)), float(found.group(3))


def truth(stdout):
    found = re.search(r"truth: kept_buffers=(\d+) kept_bytes=(\d+) leak_line=(\d+)", stdout)
    assert found, stdout
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def leak_at_line(report, line):
    """(bytes, count) of the leak groups whose stack holds torch_serving.py:LINE."""
    total = count = 0
    for leak in report["leaks"]:
        if any((frame.get("file") or "").endswith("torch_serving.py") and frame.get("line") == line
               for frame in leak["stack"]):
            total += leak["bytes"]
            count += leak["count"]
    return total, count


class GpuTopTest(TraceDirTestCase):
    figures = []

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def setUp(self):
        super().setUp()
        if not have_torch_cuda(PYTHON):
            self.skipTest("no PyTorch with CUDA here")

    def serve(self, name, seconds, options=(), tick_s=0):
        trace = self.path(name)
        app = subprocess.Popen([CLI, "run", "-q", *options, "-o", trace, "--", PYTHON, SCRIPT, str(seconds),
                                str(LEAK_EVERY), str(tick_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        self.addCleanup(stop_run, app)
        wait_for_socket(trace + ".ctl", app)
        return trace, app

    def test_1_a_snapshot_and_top_name_the_leaking_line_while_it_serves(self):
        trace, app = self.serve("serve.db", 40)
        time.sleep(15)
        snapshot = run_cli("ctl", trace, "snapshot", "mid")
        self.assertEqual(snapshot.returncode, 0, snapshot.stderr)
        started = time.monotonic()
        top = run_cli("top", "--once", trace)
        top_seconds = time.monotonic() - started
        self.assertEqual(top.returncode, 0, top.stderr)
        self.assertIn("[running]", top.stdout)
        out, err = app.communicate(timeout=600)
        self.assertEqual(app.returncode, 0, err[-3000:])
        kept_buffers, kept_bytes, line = truth(out)
        self.assertGreater(kept_buffers, 2)
        where = f"torch_serving.py:{line}"
        listed = [l for l in top.stdout.splitlines() if where in l and l.startswith("  ")]
        self.assertTrue(listed, top.stdout)
        top_bytes = int(re.search(r"\((\d+) B\)", listed[0]).group(1))
        # The whole run's leak, exact; the snapshot's is the part kept by then, and top (read after it) saw at least
        # that much and at most all of it.
        final_bytes, final_count = leak_at_line(report_json(trace), line)
        self.assertEqual((final_bytes, final_count), (kept_bytes, kept_buffers))
        at_mid = report_json(trace, "--at", "mid")
        mid_bytes, mid_count = leak_at_line(at_mid, line)
        self.assertGreater(mid_count, 0)
        self.assertLess(mid_count, kept_buffers)
        self.assertLessEqual(mid_bytes, top_bytes)
        self.assertLessEqual(top_bytes, kept_bytes)
        self.figures.append(f"top on a PyTorch service: `top --once` after 15 s named {where} holding {top_bytes} B "
                            f"({top_seconds:.2f} s to read the running trace); `report --at mid` {mid_bytes} B in "
                            f"{mid_count} buffers; at exit {kept_bytes} B in {kept_buffers} (the sample's own count)")

    def test_2_what_top_refreshing_every_second_costs_the_service(self):
        """One service per trace mode, `top --interval 1` switched on in every other window while it serves
        (bench/serving_windows.py: separate runs spread more than the 1% to be shown; neighbouring windows of one run
        cancel a drift)."""
        for mode, options in (("full", ()), ("aggregate", ("--aggregate",))):
            windows, window_s = 13, 6  # off, on, off, ..., off
            trace, app = self.serve(f"cost-{mode}.db", SERVICE_S, options, tick_s=0.1)
            output = serving_windows.ServiceOutput(app)
            first = output.first_tick(app)
            self.assertIsNotNone(first, "the service printed no tick")
            done = serving_windows.toggle_top(CLI, trace, self.path(f"top-{mode}"), first + WARMUP_S, windows,
                                              window_s, until=first + SERVICE_S)
            app.wait(timeout=600)
            stdout, stderr = output.finish()
            self.assertEqual(app.returncode, 0, stderr[-3000:])
            self.assertEqual(set(done.exits), {0})  # SIGTERM ends top cleanly
            self.assertGreaterEqual(len(done.spans), 7, done.spans)
            cost, control, rates = serving_windows.watcher_cost(output.ticks, done.spans)
            # It refreshed: about every second on the bounded aggregate trace; a full trace's refresh analyzes every
            # event so far and slows as the run goes on (the frames say how often it managed).
            self.assertGreaterEqual(min(done.frames), window_s // 2 if mode == "aggregate" else 1, done.frames)
            self.figures.append(
                f"top's cost ({mode} trace, one service, {len(rates) // 2} windows of {window_s} s or more with `top "
                f"--interval 1` beside it against the off-windows either side): {cost:+.2%} requests/s (A/A control "
                f"{control:+.2%}); top drew {done.frames} frames and used "
                f"{sum(done.cpu_s) / len(done.cpu_s):.2f} CPU s per window; the windows' requests/s "
                f"{[round(r, 1) for r in rates]}")


WARMUP_S = 8
SERVICE_S = 110  # 13 windows of 6 s after the warm-up, and time for a full trace's slower refreshes


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); the GPU suite runs on the H200 via "
              "scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
