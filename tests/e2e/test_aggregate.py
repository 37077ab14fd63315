"""`run --aggregate`: a bounded trace that still answers exactly (docs/trace-format.md "Aggregate traces").

The same deterministic service (samples/service_loop.cu: variable-length requests from many call sites, a slow leak
hidden in one of them, an NVTX range per request) is recorded twice on the simulated runtime, as a full trace and
as an aggregate one, and their reports must agree: leaks, totals, the peak and what was live then, the failure and
its context exactly; growth over time and per range repetition name the same stack and range (per window). An
aggregate trace of a run 8 times as long is hardly larger, and a kill -9 at a random moment leaves a readable
aggregate trace that gives no clean verdict."""
import json
import os
import random
import signal
import subprocess
import time
import unittest

from gmt_e2e import CLI, TraceDirTestCase, find_leak, marker_line, parse_truth, report_json, run_cli, sample

# Windows of 20 ms instead of 1 s: a 1.5 s run spans ~75 of them (merged past 256, see test_bounded_size).
WINDOWS = {"GMT_AGGREGATE_WINDOW_MS": "20"}


def innermost(stack):
    return stack[0]["function"] if stack else None


class AggregateTest(TraceDirTestCase):
    def record(self, name, *args, aggregate, env=None):
        trace = self.path(name)
        mode = ["--aggregate"] if aggregate else []
        result = run_cli("run", "--simulate", "-q", *mode, "-o", trace, "--", sample("service_loop"), *args,
                         env=dict(WINDOWS, **(env or {})))
        self.assertEqual(result.returncode, 0, result.stderr)
        return trace, result.stdout

    def test_reports_agree_with_the_full_trace(self):
        # 1500 requests of 8-31 temporaries from 200 sites, one 64 KiB entry kept per 25 requests, ~1 ms each.
        args = ["1500", "200", "25", "700", "--oom-at-end"]
        full_trace, stdout = self.record("full.db", *args, aggregate=False)
        agg_trace, agg_stdout = self.record("agg.db", *args, aggregate=True)
        self.assertEqual(parse_truth(stdout), parse_truth(agg_stdout))  # the same run twice
        truth = parse_truth(stdout)[0]
        full = report_json(full_trace)
        agg = report_json(agg_trace)
        self.assertIsNone(full["aggregate"])
        self.assertIsNotNone(agg["aggregate"])
        self.assertLess(agg["aggregate"]["events_kept"], agg["aggregate"]["events_seen"] / 5)
        self.assertTrue(agg["trace"]["complete"])

        # Totals and leaks: exact.
        for key in ("allocations", "allocated_bytes", "frees", "leaked_bytes", "leaked_allocations",
                    "failed_allocations", "peak_bytes", "unmatched_frees"):
            self.assertEqual(agg["totals"][key], full["totals"][key], key)
        self.assertEqual(agg["totals"]["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(agg["totals"]["failed_allocations"], truth["failed_allocations"])

        def leaks(report):
            return [(l["bytes"], l["count"], innermost(l["stack"]), l["stack"][0]["line"]) for l in report["leaks"]]

        self.assertEqual(leaks(agg), leaks(full))
        leak = find_leak(agg, "keep_kv_entry")
        self.assertEqual(leak["stack"][0]["line"], marker_line("service_loop.cu", "LEAK-SITE: keep_kv_entry"))

        # The peak and what was live then, per device: exact (the moment too: it is the same event).
        def peaks(report):
            return [(p["device"], p["bytes"], [(s["bytes"], innermost(s["stack"])) for s in p["stacks"]])
                    for p in report["peak_stacks"]]

        self.assertEqual(peaks(agg), peaks(full))
        self.assertEqual(agg["peak_by_kind"], full["peak_by_kind"])

        # The failure and the memory live then.
        self.assertEqual(len(agg["failures"]), 1)
        for key in ("requested_bytes", "api", "device"):
            self.assertEqual(agg["failures"][0][key], full["failures"][0][key])
        self.assertEqual([(s["bytes"], innermost(s["stack"])) for s in agg["failures"][0]["top_stacks"]],
                         [(s["bytes"], innermost(s["stack"])) for s in full["failures"][0]["top_stacks"]])
        def without_times(fragmentation):  # two runs: the same events, at other moments
            return [{k: ({kk: vv for kk, vv in v.items() if kk != "time_ns"} if isinstance(v, dict) else v)
                     for k, v in device.items()} for device in fragmentation]

        self.assertEqual(without_times(agg["fragmentation"]), without_times(full["fragmentation"]))

        # Growth over time: both find the device growing at the leak's line (per window in the aggregate trace).
        for report in (full, agg):
            growth = report["growth"]
            self.assertTrue(growth["analyzed"], growth["reason"])
            self.assertEqual(len(growth["findings"]), 1, growth)
            top = growth["findings"][0]["stacks"][0]
            self.assertIn("keep_kv_entry", innermost(top["stack"]))
        rate_full = full["growth"]["findings"][0]["rate_bytes_per_s"]
        rate_agg = agg["growth"]["findings"][0]["rate_bytes_per_s"]
        self.assertLess(abs(rate_agg - rate_full), 0.35 * rate_full, (rate_agg, rate_full))

        # Growth per repetition of the "request" range: 64 KiB every 25 repetitions in both.
        def request_growth(report):
            [g] = [g for g in report["ranges"]["growth"] if g["name"] == "request"]
            return g

        full_request, agg_request = request_growth(full), request_growth(agg)
        self.assertEqual(agg_request["iterations"], full_request["iterations"])
        self.assertEqual(agg_request["iterations"], 1500)
        self.assertAlmostEqual(agg_request["bytes_per_iteration"], 65536 / 25, delta=65536 / 25 * 0.1)
        self.assertAlmostEqual(full_request["bytes_per_iteration"], 65536 / 25, delta=65536 / 25 * 0.1)

        text = run_cli("report", agg_trace).stdout
        self.assertIn("aggregate trace:", text)

    def test_bounded_size(self):
        # The same service 8 times as long (no leak: a constant live set), 5 ms windows so both runs outgrow the
        # 256 windows and merge: the aggregate trace hardly grows; the full one grows with the run.
        sizes = {}
        for requests in (3000, 24000):
            for aggregate in (False, True):
                trace, _ = self.record(f"size-{requests}-{aggregate}.db", str(requests), "50", "1000000000",
                                       aggregate=aggregate, env={"GMT_AGGREGATE_WINDOW_MS": "1"})
                sizes[(requests, aggregate)] = os.path.getsize(trace)
                if aggregate:
                    report = report_json(trace)
                    self.assertEqual(report["totals"]["leaked_bytes"], 0)
                    self.assertLessEqual(report["aggregate"]["windows"], 256)
        small, large = sizes[(3000, True)], sizes[(24000, True)]
        print(f"aggregate: {small} B -> {large} B; full: {sizes[(3000, False)]} B -> {sizes[(24000, False)]} B")
        self.assertLess(large, 1.5 * small + 256 * 1024, sizes)
        self.assertGreater(sizes[(24000, False)], 10 * large, sizes)

    def test_kill_at_random_moments_leaves_readable_traces_without_a_verdict(self):
        seed = int(os.environ.get("GMT_KILL_SEED", time.time_ns() % 1000000))
        rng = random.Random(seed)
        for i in range(5):
            delay = rng.uniform(0.05, 1.5)
            with self.subTest(kill=i, delay_ms=round(delay * 1000), seed=seed):
                trace = self.path(f"kill-{i}.db")
                cli = subprocess.Popen([CLI, "run", "--simulate", "-q", "--aggregate", "-o", trace, "--",
                                        sample("service_loop"), "100000", "100", "20", "200"],
                                       env=dict(os.environ, **WINDOWS), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
                time.sleep(delay)
                with open(f"/proc/{cli.pid}/task/{cli.pid}/children") as children:
                    app = [int(c) for c in children.read().split()]
                for pid in app:
                    os.kill(pid, signal.SIGKILL)
                cli.communicate(timeout=120)
                self.assertEqual(cli.returncode, 128 + signal.SIGKILL)
                if not os.path.exists(trace):
                    continue  # killed before its trace existed: `run` says so (test_crashes)
                report = report_json(trace)  # readable: exit 0, or it raises
                self.assertFalse(report["trace"]["complete"])
                if report["aggregate"] and report["aggregate"]["events_seen"] > 0:  # a checkpoint was committed
                    self.assertGreaterEqual(report["totals"]["leaked_bytes"], 16 << 20)  # the model, still live
                gate = run_cli("report", "--fail-on-leak", trace)
                self.assertEqual(gate.returncode, 4, gate.stderr)  # no verdict on an incomplete trace

    def test_commands_that_need_every_event_refuse_it(self):
        trace, _ = self.record("refuse.db", "50", "10", "10", aggregate=True)
        for args, option in ((["--format", "perfetto", "-o", self.path("t.json")], "--format perfetto"),
                             (["--format", "memory-viz", "-o", self.path("s.pickle")], "--format memory-viz"),
                             (["--since", "0.1"], "--since"), (["--until", "0.1"], "--until"),
                             (["--range", "request"], "--range")):
            with self.subTest(option=option):
                result = run_cli("report", *args, trace)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertIn(option, result.stderr)
                self.assertIn("aggregate trace", result.stderr)
        result = run_cli("run", "--aggregate", "--verify", "-o", self.path("v.db"), "--", "true")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--aggregate", result.stderr)
        html = run_cli("report", "--format", "html", "-o", self.path("r.html"), trace)
        self.assertEqual(html.returncode, 0, html.stderr)
        self.assertIn("aggregate trace", html.stderr)

    def test_the_summary_counts_what_was_seen_and_a_snapshot_is_refused_by_its_name(self):
        # slow enough (~3 s) for a `ctl snapshot` while it runs
        trace = self.path("snap.db")
        app = subprocess.Popen([CLI, "run", "--simulate", "--aggregate", "-o", trace, "--", sample("service_loop"),
                                "3000", "50", "25", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, **WINDOWS))
        socket = trace + ".ctl"
        deadline = time.monotonic() + 30
        while not os.path.exists(socket) and app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        snapshot = run_cli("ctl", trace, "snapshot", "mid")
        _, stderr = app.communicate(timeout=300)
        self.assertEqual(app.returncode, 0, stderr)
        self.assertEqual(snapshot.returncode, 0, snapshot.stderr)
        summary = report_json(trace)["aggregate"]
        # The rate is of the events seen, not of the few kept as rows.
        self.assertIn(f"recorded {summary['events_seen']} events in ", stderr)
        self.assertIn(f", {summary['events_kept']} kept as rows (run --aggregate)", stderr)
        self.assertLess(summary["events_kept"], summary["events_seen"] / 5)
        result = run_cli("report", "--at", "mid", trace)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(result.stderr.strip().splitlines(),
                         ["gpumemtrace: --at mid needs every event, and this is an aggregate trace (run --aggregate "
                          "keeps the live set and per-window sums): report it without --at, or record a full trace"])


if __name__ == "__main__":
    unittest.main()
