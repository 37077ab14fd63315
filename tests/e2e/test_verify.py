"""run --verify without a GPU: what `run` refuses, what the library records about its choice of backend, and
`report` on traces made the way run --verify writes them. Such a trace is built from a real simulated-runtime trace
of samples/leaky: each memory event is recorded twice, as the counting backend's (hooks, source 3) and as the
cross-check's (cupti, source 2), next to each other in the order the two driver-level backends write one call's
records; dropping one of those records is a backend that missed an event. The H200 half (both backends really running) is
tests/gpu/test_gpu_verify.py."""
import ctypes
import json
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, marker_line, parse_truth, report_json, run_cli, sample

HOOKS, CUPTI = 3, 2  # schema Source codes
MEMORY_KINDS = (1, 2, 3)  # alloc, free, alloc_failed
LOAD_WEIGHTS_BYTES = 4 << 20  # samples/leaky.cu: the one 4 MiB allocation
COLUMNS = "time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, size, stack_id, error, handle, context"


def make_verify_trace(source_trace, path, drop=None, meta=None):
    """A copy of `source_trace` as run --verify writes it; `drop(row, source)` leaves out that backend's record."""
    with sqlite3.connect(source_trace) as src, sqlite3.connect(path) as dst:
        src.backup(dst)
    db = sqlite3.connect(path)
    rows = db.execute(f"SELECT id, {COLUMNS} FROM events ORDER BY id").fetchall()
    failures = {r[0]: r[1:] for r in db.execute("SELECT event_id, device_free, device_total FROM alloc_failures")}
    db.execute("DELETE FROM events")
    db.execute("DELETE FROM alloc_failures")
    placeholders = ", ".join("?" * (COLUMNS.count(",") + 2))
    next_id = 1
    for row in rows:
        memory = row[2] in MEMORY_KINDS
        # The order the backends write one call's records in: CUPTI's callback runs inside the driver wrapper's
        # call, so it records an allocation first and a free second (analysis/model/verify.h).
        order = ((HOOKS, CUPTI) if row[2] == 2 else (CUPTI, HOOKS)) if memory else (row[4],)
        for source in order:
            if drop and memory and drop(row, source):
                continue
            values = list(row)
            values[0], values[4] = next_id, source
            db.execute(f"INSERT INTO events(id, {COLUMNS}) VALUES ({placeholders})", values)
            if row[0] in failures and source != CUPTI:
                db.execute("INSERT INTO alloc_failures VALUES (?, ?, ?)", (next_id, *failures[row[0]]))
            next_id += 1
    settings = {"backend": "hooks", "backend_reason": "hooks_bind", "verify_backend": "cupti", **(meta or {})}
    for key, value in settings.items():
        if value is None:
            db.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
    db.commit()
    db.close()
    return path


def have_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def is_load_weights(row):
    return row[2] == 1 and row[10] == LOAD_WEIGHTS_BYTES


class VerifyTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("leaky.db")
        cls.run_result = run_cli("run", "--simulate", "-o", cls.trace, "--", sample("leaky"))
        if cls.run_result.returncode != 0:
            raise AssertionError(cls.run_result.stderr)
        with sqlite3.connect(cls.trace) as db:
            cls.memory_events = db.execute(f"SELECT count(*) FROM events WHERE kind IN {MEMORY_KINDS}").fetchone()[0]

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def report(self, trace, *args):
        return run_cli("report", *args, trace)

    def test_run_refuses_verify_where_there_is_no_second_backend(self):
        for option in (["--simulate"], ["--backend", "runtime"]):
            with self.subTest(option=option):
                trace = self.path("refused.db")
                result = run_cli("run", "--verify", *option, "-o", trace, "--", sample("leaky"))
                self.assertEqual(result.returncode, 125, result.stderr)
                self.assertIn("--verify compares the two driver-level backends (hooks and cupti); "
                              f"{' '.join(option)} counts at the runtime level", result.stderr)
                self.assertFalse(os.path.exists(trace))

    def test_the_library_records_why_it_counts_where_it_does(self):
        with sqlite3.connect(self.trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta"))
        self.assertEqual((meta["backend"], meta["backend_reason"]), ("runtime", "simulated"))
        self.assertNotIn("backend_note", meta)
        self.assertNotIn("verify_backend", meta)
        self.assertEqual(report_json(self.trace)["trace"]["backend_reason"], "simulated")
        self.assertIsNone(report_json(self.trace)["cross_check"])

    def test_agreeing_backends_count_every_allocation_once(self):
        trace = make_verify_trace(self.trace, self.path("agree.db"))
        report = report_json(trace)
        truth = parse_truth(self.run_result.stdout)[0]
        totals = report["totals"]
        self.assertEqual((totals["allocations"], totals["frees"]), (26, 20))
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        self.assertEqual(totals["failed_allocations"], truth["failed_allocations"])
        self.assertEqual((totals["unmatched_frees"], totals["inconsistencies"]), (0, 0))
        check = report["cross_check"]
        self.assertEqual((check["counting_backend"], check["checking_backend"]), ("hooks", "cupti"))
        self.assertEqual((check["matched"], check["counting_events"], check["checking_events"]),
                         (self.memory_events,) * 3)
        self.assertEqual((check["disagreements"], check["groups"]), (0, []))
        result = self.report(trace, "--fail-on-disagreement")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(f"Cross-check (run --verify): hooks and cupti agree: {self.memory_events} events matched one "
                      "to one, none seen by only one backend\n", result.stdout)

    def test_an_allocation_the_cross_check_missed_leads_the_report_and_fails_the_gate(self):
        trace = make_verify_trace(self.trace, self.path("missed.db"),
                                  drop=lambda row, source: source == CUPTI and is_load_weights(row))
        result = self.report(trace, "--fail-on-disagreement")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stderr.strip().splitlines(), [
            "gpumemtrace: --fail-on-disagreement failed: 1 event seen by only one backend (1 only by hooks, 0 only by "
            f"cupti; {self.memory_events - 1} matched)"])
        text = result.stdout
        section = text.index("Cross-check (run --verify): 1 event seen by only one backend\n")
        self.assertLess(section, text.index("\nTotals\n"))
        self.assertIn("  only hooks saw: 1 allocation (cudaMalloc, device), 4.00 MiB (4194304 B), first at ", text)
        stack = text[text.index("  only hooks saw:"):].splitlines()[1]
        self.assertIn("load_weights", stack)
        self.assertIn(f"samples/leaky.cu:{marker_line('leaky.cu', 'LEAK-SITE: load_weights')}", stack)
        # The figures are the counting backend's, untouched by what the cross-check missed.
        self.assertEqual(report_json(trace)["totals"]["leaked_bytes"], parse_truth(self.run_result.stdout)[0]["leaked_bytes"])

    def test_a_free_the_counting_backend_missed_is_named_too(self):
        # The hooks lost the free of one temporary cudaMalloc: their figures show it live, the cross-check says why.
        with sqlite3.connect(self.trace) as db:
            address = db.execute("SELECT address FROM events WHERE kind = 2 AND api = 9 ORDER BY id LIMIT 1").fetchone()[0]
        dropped = []

        def drop(row, source):
            if source == HOOKS and row[2] == 2 and row[9] == address and not dropped:
                dropped.append(row)
                return True
            return False

        report = report_json(make_verify_trace(self.trace, self.path("free.db"), drop=drop), "--top", "20")
        check = report["cross_check"]
        self.assertEqual((check["only_counting"], check["only_checking"]), (0, 1))
        [group] = check["groups"]
        self.assertEqual((group["seen_by"], group["missed_by"], group["kind"], group["api"], group["count"]),
                         ("cupti", "hooks", "free", "cudaFree", 1))
        self.assertEqual(report["totals"]["frees"], 19)

    def test_the_gate_needs_a_verify_trace(self):
        result = self.report(self.trace, "--fail-on-disagreement")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        self.assertIn("was not recorded with `gpumemtrace run --verify`", result.stderr)

    def test_a_cross_check_that_did_not_run_is_no_clean_verdict(self):
        # Only the counting backend recorded (CUPTI could not start): its figures stand, the verdict does not.
        trace = make_verify_trace(self.trace, self.path("held.db"), drop=lambda row, source: source == CUPTI, meta={
            "verify_backend": None, "verify_unavailable": "CUPTI is held by another tool"})
        result = self.report(trace, "--fail-on-disagreement")
        self.assertEqual(result.returncode, 1)
        self.assertIn("--fail-on-disagreement failed: the cross-check did not run: CUPTI is held by another tool",
                      result.stderr)
        self.assertIn("Cross-check (run --verify): did not run: CUPTI is held by another tool\n", result.stdout)
        report = json.loads(run_cli("report", "--format", "json", trace).stdout)
        self.assertFalse(report["cross_check"]["ran"])
        self.assertEqual(report["totals"]["allocations"], 26)

    def test_verify_of_a_process_that_recorded_nothing_is_no_clean_verdict(self):
        # The stand-in trace of a process that made no CUDA call says that nothing was compared.
        trace = self.path("nothing.db")
        result = run_cli("run", "--verify", "-o", trace, "--", "true")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("cross-check: did not run: the process recorded nothing", result.stderr)
        gate = self.report(trace, "--fail-on-disagreement")
        self.assertEqual(gate.returncode, 1, gate.stderr)

    @unittest.skipIf(have_driver(), "a CUDA driver is installed here: tests/gpu/test_gpu_verify.py covers it")
    def test_the_library_says_once_why_no_cross_check_runs_without_a_driver(self):
        # threaded's first call, cudaFree(0), makes the library decide: no driver, so the runtime hooks count and
        # --verify has no second backend. (The call then fails: the app exits 1 without a trace of its own.)
        result = run_cli("run", "--verify", "-o", self.path("nodriver.db"), "--", sample("threaded"), "1", "1")
        self.assertEqual(result.returncode, 1, result.stderr)
        said = [line for line in result.stderr.splitlines() if "--verify" in line]
        self.assertEqual(said, ["gpumemtrace: --verify: no cross-check in this process: no CUDA driver here "
                                "(libcuda.so.1), so there is no second backend to compare with"])


if __name__ == "__main__":
    unittest.main()
