"""The stack memo across code objects freed and remade at the same addresses (unwind/python_frames.h): each stack
must name the code object that allocated, never one that lived at its address before. On CPython 3.12+ the
in-process package registers a code watcher (python/gpumemtrace_inprocess/code_watch.py) and the memo keys code
objects by address and the count of those destroyed: exact, with and without the cut, and under GMT_UNWIND=check
no memo answer differs from the whole stack. Before 3.12, and with GMT_CODE_WATCH=0, it keys them by the addresses
of their file, name and line-table objects, which a later code object can reuse: the check mode then records the
whole stacks (exact) and counts the answers that differed.
"""
import os
import re
import sqlite3

from gmt_e2e import TraceDirTestCase, parse_truth, report_json, run_cli
from test_python_frames import SUPPORTED

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "code_reuse_app.py")
ROUNDS = 150
CALLS_PER_ROUND = 4  # code_reuse_app.py's


def read_meta(trace):
    with sqlite3.connect(trace) as db:
        return dict(db.execute("SELECT key, value FROM meta"))


class CodeWatchTest(TraceDirTestCase):
    def profile(self, python, name, env):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", python, APP, str(ROUNDS), env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        reused = int(re.search(r"code objects at a reused address: (\d+)", result.stdout).group(1))
        self.assertGreater(reused, ROUNDS // 2, "the premise: code objects made again at freed addresses")
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace, "--top", str(2 * ROUNDS))
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        return report, read_meta(trace)

    def assert_each_round_named(self, report):
        """Each of a round's allocations (1000 + round bytes) is named by its own round's file, at the call's line."""
        named = {}
        for leak in report["leaks"]:
            innermost = next(frame for frame in leak["stack"] if frame["python"])
            for _ in range(leak["count"]):
                named.setdefault(leak["bytes"] // leak["count"], []).append((innermost["file"], innermost["line"]))
        self.assertEqual(sorted(named), [1000 + n for n in range(ROUNDS)])
        for size, places in named.items():
            self.assertEqual(places, [(f"gen_{size - 1000}.py", 4)] * CALLS_PER_ROUND, size)

    def test_each_stack_names_the_code_object_that_allocated(self):
        watched = {minor: python for minor, python in SUPPORTED.items() if minor >= 12}
        if not watched:
            self.skipTest("no CPython 3.12+ here (pyenv)")
        for minor, python in sorted(watched.items()):
            for name, env in (("default", {}), ("cut", {"GMT_STACK_CUT": "1"}), ("check", {"GMT_UNWIND": "check"})):
                with self.subTest(python=f"3.{minor}", mode=name):
                    report, meta = self.profile(python, f"{name}.3{minor}.db", env)
                    self.assert_each_round_named(report)
                    self.assertIn("python_code_watcher", meta)
                    # A round's later stacks are the memo's (counted by 64s per thread).
                    self.assertGreaterEqual(int(meta["stack_memo_hits"]), ROUNDS - 64, meta)
                    if name == "check":
                        self.assertGreaterEqual(int(meta["stack_memo_checked"]), ROUNDS - 64, meta)
                        self.assertEqual(meta["stack_memo_mismatches"], "0", meta)

    def test_without_the_watcher_the_check_mode_keeps_the_stacks_exact(self):
        # Before 3.12 (and with GMT_CODE_WATCH=0) the memo tells code objects apart by the addresses of their file,
        # name and line-table objects, which a later code object can have too (docs/design.md, "The stack memo"):
        # the check mode takes every memo answer in full, records the full stack and counts the answers that differed.
        for minor, python in sorted(SUPPORTED.items()):
            with self.subTest(python=f"3.{minor}"):
                report, meta = self.profile(python, f"unwatched.3{minor}.db",
                                            {"GMT_UNWIND": "check", "GMT_CODE_WATCH": "0"})
                self.assert_each_round_named(report)
                self.assertNotIn("python_code_watcher", meta)
                self.assertGreaterEqual(int(meta["stack_memo_checked"]), ROUNDS - 64, meta)
