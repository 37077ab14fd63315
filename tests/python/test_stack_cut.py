"""The stack memo's cut on real CPython (recorder/stacks.cpp; unwind/fast_unwind.h, StoredAnswer::kToTheCut): in a
Python thread a stack taken again is checked only up to its first frame in the eval loop, and the memo answers for
the native frames beyond it from the Python frame chain (GMT_STACK_CUT=1). The answers must be those of a whole walk:
the same leak groups, frames and lines with the cut, with the memo off, and under GMT_UNWIND=check, which compares
every memo answer with the whole stack and finds none differing. The one case the cut cannot tell apart (two
native paths with frames of one size to the same Python frames) must be counted by the check mode. Every
supported CPython (3.9-3.13) that pyenv has is run."""
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, parse_truth, report_json, run_cli
from test_python_frames import SUPPORTED, app_line

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cut_app.py")
TWO_PATHS = os.environ.get("TWO_PATHS_LIBRARY", "")
ROUNDS = 200
CUT = {"GMT_STACK_CUT": "1"}  # off by default: not shown to pay (docs/benchmarks.md, 2026-12-07)


def read_meta(trace):
    with sqlite3.connect(trace) as db:
        return dict(db.execute("SELECT key, value FROM meta"))


def leak_groups(report):
    """Each leak group's bytes, count and frames (all but the addresses, which differ between runs: ASLR)."""
    return sorted((leak["bytes"], leak["count"], [tuple(sorted((k, str(v)) for k, v in frame.items() if k != "pc"))
                                                  for frame in leak["stack"]]) for leak in report["leaks"])


class StackCutTest(TraceDirTestCase):
    def profile(self, python, name, *args, env=None):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", python, APP, str(ROUNDS), *args, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("not supported", result.stderr)
        truth = parse_truth(result.stdout)[0]
        report = report_json(trace)
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        return report, read_meta(trace)

    def test_the_cut_answers_as_a_whole_walk_would(self):
        for minor, python in sorted(SUPPORTED.items()):
            with self.subTest(python=f"3.{minor}"):
                cut, cut_meta = self.profile(python, f"cut.3{minor}.db", env=CUT)
                whole, _ = self.profile(python, f"whole.3{minor}.db", env={"GMT_STACK_MEMO": "0"})
                checked, check_meta = self.profile(python, f"check.3{minor}.db", env={"GMT_UNWIND": "check", **CUT})
                # The premise: the cut answered most stacks, and the memo completed them.
                self.assertGreater(int(cut_meta["stack_walks_to_the_cut"]), ROUNDS, cut_meta)
                self.assertGreater(int(cut_meta["stack_memo_hits"]), ROUNDS, cut_meta)
                self.assertEqual(leak_groups(cut), leak_groups(whole))
                self.assertEqual(leak_groups(checked), leak_groups(whole))
                self.assertGreater(int(check_meta["stack_memo_checked"]), ROUNDS, check_meta)
                self.assertEqual(check_meta["stack_memo_mismatches"], "0", check_meta)
                self.assertEqual(check_meta["stack_walk_mismatches"], "0", check_meta)
                # Each place's own Python lines, innermost first: the exact lines, not only equal ones.
                by_bytes = {leak["bytes"] // leak["count"]: leak for leak in cut["leaks"]}
                lines = [f["line"] for f in by_bytes[1000]["stack"] if f["python"]]
                self.assertEqual(lines[:5], [app_line(marker, APP) for marker in
                                             ("cuda_malloc", "keep", "Inner.__call__", "Outer.__call__", "main")])
                self.assertEqual(by_bytes[1000]["count"], ROUNDS)
                self.assertEqual(by_bytes[2000]["count"], ROUNDS)

    def test_a_place_under_many_python_lines_is_answered_by_the_memo(self):
        # cut_app's from_six_lines reaches one native place (one kept walk) from six Python lines each round: the
        # memo keeps a stack per (walk, chain), not four per walk, so after the first round every one is answered.
        for minor, python in sorted(SUPPORTED.items()):
            for name, env in (("whole", {}), ("cut", CUT)):
                with self.subTest(python=f"3.{minor}", walk=name):
                    report, meta = self.profile(python, f"six.{name}.3{minor}.db", env=env)
                    six = [leak for leak in report["leaks"] if leak["bytes"] == 500 * leak["count"]]
                    self.assertEqual(sorted(leak["count"] for leak in six), [ROUNDS] * 6)
                    # 10 stacks a round; the first round's and those of the thread's last, partial, count of 64 aside.
                    self.assertGreaterEqual(int(meta["stack_memo_hits"]), int(meta["stack_walks_counted"]) - 64, meta)

    @unittest.skipUnless(TWO_PATHS, "TWO_PATHS_LIBRARY is not set (ctest sets it)")
    def test_two_native_paths_to_the_same_python_frames_are_counted_by_the_check(self):
        minor, python = max(SUPPORTED.items())
        checked, meta = self.profile(python, "two_paths.db", TWO_PATHS, env={"GMT_UNWIND": "check", **CUT})
        # The whole stacks are the ones recorded: the callback's leaks in two groups, one per native path.
        by_path = {}
        for leak in checked["leaks"]:
            if leak["bytes"] // leak["count"] == 3000:
                names = [f["function"] or "" for f in leak["stack"]]
                path = next((p for p in ("x", "y") if any(f"gmt_path_{p}" in name for name in names)), "?")
                by_path[path] = by_path.get(path, 0) + leak["count"]
        self.assertEqual(by_path, {"x": ROUNDS // 2, "y": ROUNDS // 2}, checked["leaks"])
        # The memo, keyed on the Python frames beyond the cut, answered one path's stack for the other, and the
        # check counted those answers: about one per path-y round (97-100 of 100 seen; a kept walk or memo entry
        # that another stack took over costs a round its memo answer).
        self.assertGreaterEqual(int(meta["stack_memo_mismatches"]), ROUNDS // 4, meta)
        # Without the cut (the default) the memo's answers rest on the whole walk: none differs.
        _, whole_meta = self.profile(python, "two_paths_whole.db", TWO_PATHS, env={"GMT_UNWIND": "check"})
        self.assertEqual(whole_meta["stack_walks_to_the_cut"], "0", whole_meta)
        self.assertGreater(int(whole_meta["stack_memo_checked"]), ROUNDS, whole_meta)
        self.assertEqual(whole_meta["stack_memo_mismatches"], "0", whole_meta)


if __name__ == "__main__":
    unittest.main()
