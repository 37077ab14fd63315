"""An app that outruns the writer (8 threads of alloc+free pairs as fast as they go): zero loss, bounded
memory, the back-pressure counted in the trace, and times in recording order."""
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli

THREADS = 8
PAIRS = 50000
FLOOD = os.path.join(os.environ["GMT_BUILD_DIR"], "bench", "event_flood")


def key_values(text):
    return {k.strip(): float(v) for k, _, v in (line.partition(": ") for line in text.splitlines()) if v}


class BackpressureTest(TraceDirTestCase):
    def test_flood_loses_nothing_stays_bounded_and_says_it_waited(self):
        trace = self.path("flood.db")
        result = run_cli("run", "--simulate", "-q", "--no-symbolize", "-o", trace, "--", FLOOD, str(THREADS),
                         str(PAIRS), timeout=280)
        self.assertEqual(result.returncode, 0, result.stderr)
        app = key_values(result.stdout)
        made = 2 * THREADS * PAIRS + 2  # and the warm-up pair
        self.assertEqual(app["events"], made)
        db = sqlite3.connect(trace)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        self.assertEqual(db.execute("SELECT count(*) FROM events").fetchone()[0], made)
        self.assertEqual(db.execute("SELECT count(*) FROM events WHERE kind = 1").fetchone()[0], made // 2)
        self.assertEqual(meta["dropped_events"], "0")
        self.assertEqual(meta["complete"], "1")
        # Times never go backwards in recording order (the recorder keeps it so; the analyzer relies on it).
        self.assertEqual(meta["events_time_ordered"], "1")
        backwards = db.execute("SELECT count(*) FROM events a JOIN events b ON b.id = a.id + 1 "
                               "WHERE b.time_ns < a.time_ns").fetchone()[0]
        self.assertEqual(backwards, 0)
        # Waits are counted with their total time, or absent when the writer kept up.
        if "backpressure_waits" in meta:
            self.assertGreater(int(meta["backpressure_waits"]), 0)
            self.assertGreater(int(meta["backpressure_wait_ns"]), 0)
        else:
            self.assertNotIn("backpressure_wait_ns", meta)
        db.close()
        # Bounded: the recorder's buffers (at most ~35 MB of events) and the rest stay under 64 MiB. Not under
        # scripts/sanitize.sh's preloaded ASan, whose shadow memory and quarantine are most of the app's RSS.
        if "libasan" not in os.environ.get("LD_PRELOAD", ""):
            self.assertLess(app["vm_hwm_kib"], 64 * 1024)
        self.assertEqual(app["threads"], 2)  # main and the writer
        report = report_json(trace)
        self.assertEqual(report["totals"]["allocations"], made // 2)
        self.assertEqual(report["totals"]["frees"], made // 2)
        self.assertEqual(report["totals"]["leaked_bytes"], 0)


if __name__ == "__main__":
    unittest.main()
