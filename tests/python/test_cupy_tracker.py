"""CuPy's arrays recorded as the blocks of a heap (python/gpumemtrace_inprocess/cupy_tracker.py), against the fake
cupy of fixtures_cupy/ (a labelled TEST FIXTURE: CI has no CuPy) under the simulated runtime: the arrays alive at exit
are the leak, named at the line that made them; the pool's chunks are cached at exit, not a leak; every count at
its level in `run`'s summary. The GPU suite (tests/gpu/test_gpu_answers.py) runs the same path against the real
CuPy."""
import os
import sqlite3
import sys
import unittest

from gmt_e2e import line_of, TraceDirTestCase, report_json, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "cupy_app.py")
FIXTURE = os.environ["GMT_CUPY_FIXTURE"]
STEPS = 10
MiB = 1 << 20
CUPY_ALLOCATOR = 6  # schema Source::CupyAllocator


def marker(text):
    return line_of(APP, text)


class CupyTrackerTest(TraceDirTestCase):
    def run_app(self, name, *options):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-o", trace, *options, "--", sys.executable, APP, str(STEPS),
                         env={"PYTHONPATH": FIXTURE})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("done True", result.stdout)
        return trace, result

    def test_arrays_alive_at_exit_are_the_leak_and_the_chunks_are_cached(self):
        trace, result = self.run_app("cupy.db")
        printed = dict(line.split(" ", 1) for line in result.stdout.splitlines())
        total = (1 + 2 * STEPS) * MiB  # one scratch chunk, reused every step, and each kept array's chunk
        self.assertEqual(int(printed["pool_total"]), total)
        with sqlite3.connect(trace) as db:
            kinds = dict(db.execute("SELECT kind, count(*) FROM events WHERE source = ? GROUP BY kind",
                                    (CUPY_ALLOCATOR,)).fetchall())
        self.assertEqual(kinds, {1: 2 * STEPS, 2: STEPS, 22: 1 + STEPS})  # blocks, frees, chunks (none freed)
        report = report_json(trace)
        totals = report["totals"]
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]), (STEPS * 2 * MiB, STEPS))
        self.assertEqual((totals["cached_at_exit_bytes"], totals["cached_at_exit_allocations"]), (total, 1 + STEPS))
        [leak] = report["leaks"]
        self.assertEqual((leak["bytes"], leak["count"]), (STEPS * 2 * MiB, STEPS))
        self.assertEqual(leak["apis"], ["cupy_block_alloc"])
        self.assertEqual(leak["memory_kinds"], ["heap_block"])
        self.assertEqual(leak["python_line"], f"{APP}:<module>:{marker('KEPT-LINE')}")
        [heap] = report["cached_at_exit"]["heaps"]
        self.assertEqual((heap["allocator"], heap["reserved_bytes"], heap["cached"]), ("CuPy's memory pool", total, True))
        [finding] = [f for f in report["findings"] if f["kind"] == "leak"]
        self.assertEqual(finding["user_frame"], f"<module> {APP}:{marker('KEPT-LINE')}")
        stderr = result.stderr
        self.assertIn(f"  block level (CuPy's memory pool): blocks {2 * STEPS}, freed {STEPS}, failed requests 0\n",
                      stderr)
        self.assertIn(f"  CUDA level: allocations {1 + STEPS}, frees 0, failed allocations 0\n", stderr)
        self.assertIn(f"in {STEPS} blocks from 1 call stack", stderr)
        self.assertIn(f"cached at exit by CuPy's memory pool: {1 + 2 * STEPS}.00 MiB ({total} B) (not a leak)", stderr)

    def test_without_block_tracking_the_pool_is_cuda_level(self):
        trace, result = self.run_app("off.db", "--no-torch-blocks")  # frameworks' blocks off: CuPy's too
        with sqlite3.connect(trace) as db:
            count = db.execute("SELECT count(*) FROM events WHERE source = ?", (CUPY_ALLOCATOR,)).fetchone()[0]
        self.assertEqual(count, 0)
        report = report_json(trace)
        self.assertEqual(report["totals"]["leaked_allocations"], 1 + STEPS)  # the chunks, at the CUDA level


if __name__ == "__main__":
    unittest.main()
