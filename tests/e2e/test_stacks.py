"""Stacks stay exact with the stack cache and the stack taken in the runtime hook (recorder/stacks.h,
recorder/caller_stack.h): one allocation site reached through two callers gives two stacks, the same
recursion at two depths gives two stacks of the right lengths, and a module loaded, unloaded and loaded again
has its allocations attributed to its own function each time. The sample interleaves the paths, so a cached
stack is always looked up again after another one. The stacks are walked by unwind/fast_unwind.h: with
GMT_UNWIND=check every stack is also walked by libunwind and the two must agree, through the plugin's
dlclose and reload too."""
import os
import sqlite3
import unittest

from gmt_e2e import SAMPLES, TraceDirTestCase, marker_line, parse_truth, report_json, run_cli, sample

REPEATS = 5
PLUGIN = os.path.join(SAMPLES, "libstack_shapes_plugin.so")


def functions(leak):
    return [frame["function"] or "" for frame in leak["stack"]]


class StackShapesTest(TraceDirTestCase):
    def profile(self, *options, env=None, name="stacks.db"):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", *options, "-o", trace, "--", sample("stack_shapes"), PLUGIN,
                         str(REPEATS), env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.meta = self.read_meta(trace)
        return parse_truth(result.stdout)[0], report_json(trace)

    @staticmethod
    def read_meta(trace):
        with sqlite3.connect(trace) as db:
            return dict(db.execute("SELECT key, value FROM meta"))

    def leaks_by_bytes_each(self, report):
        """leak groups keyed by the size of one allocation (each path allocates its own size)."""
        groups = {}
        for leak in report["leaks"]:
            groups.setdefault(leak["bytes"] // leak["count"], []).append(leak)
        return groups

    def test_each_path_has_its_own_exact_stack(self):
        truth, report = self.profile()
        self.assertEqual((report["totals"]["leaked_bytes"], report["totals"]["leaked_allocations"]),
                         (truth["leaked_bytes"], truth["leaked_allocations"]))
        groups = self.leaks_by_bytes_each(report)
        leaf_line = marker_line("stack_shapes.cu", "LEAF-SITE")
        # Two callers of the same site: two groups, each naming its own caller and not the other.
        for size, caller, other in ((1000, "caller_a", "caller_b"), (2000, "caller_b", "caller_a")):
            with self.subTest(caller=caller):
                self.assertEqual(len(groups[size]), 1, groups[size])
                leak = groups[size][0]
                self.assertEqual(leak["count"], REPEATS)
                self.assertEqual(leak["stack"][0]["line"], leaf_line)
                names = functions(leak)
                self.assertIn("leaf_alloc", names[0])
                self.assertTrue(any(caller in name for name in names[1:3]), names)
                self.assertFalse(any(other in name for name in names), names)
                self.assertTrue(any(name == "main" for name in names), names)
        # The same recursion at depth 3 and 6: recurse(3)..recurse(0) is 4 frames, recurse(6)..recurse(0) 7.
        for size, frames in ((3000, 4), (6000, 7)):
            with self.subTest(depth=frames - 1):
                self.assertEqual(len(groups[size]), 1, groups[size])
                leak = groups[size][0]
                self.assertEqual(leak["count"], REPEATS)
                self.assertEqual(sum("recurse" in name for name in functions(leak)), frames, functions(leak))
        # The module loaded twice: both allocations in its own function, at its own line, in its own file.
        plugin = [leak for leak in report["leaks"] if "plugin_alloc" in functions(leak)[0]]
        self.assertEqual(sum(leak["count"] for leak in plugin), 2, report["leaks"])
        self.assertEqual(sum(leak["bytes"] for leak in plugin), 2 * 7000)
        for leak in plugin:
            self.assertEqual(leak["stack"][0]["line"], marker_line("stack_shapes_plugin.cu", "PLUGIN-SITE"))
            self.assertTrue(any("call_plugin" in name for name in functions(leak)), functions(leak))

    def test_the_fast_walk_takes_every_stack(self):
        self.profile()
        self.assertEqual(self.meta.get("stack_walks_libunwind"), "0", self.meta)
        self.assertNotIn("stack_walks_checked", self.meta)

    def test_the_fast_walk_agrees_with_libunwind_on_every_stack(self):
        truth, report = self.profile(env={"GMT_UNWIND": "check"})
        # One walk per allocation (frees take none): every allocation the sample made, leaked or not.
        allocations = sum(leak["count"] for leak in report["leaks"])
        self.assertEqual(allocations, truth["leaked_allocations"])
        self.assertGreaterEqual(int(self.meta["stack_walks_checked"]), allocations)
        self.assertEqual(self.meta["stack_walk_mismatches"], "0")
        self.assertEqual(self.meta["stack_walks_libunwind"], "0")

    def test_the_run_option_chooses_the_walk(self):
        truth, _ = self.profile("--unwind", "check")
        self.assertEqual(self.meta["stack_walk_mismatches"], "0")
        self.assertGreaterEqual(int(self.meta["stack_walks_checked"]), truth["leaked_allocations"])
        result = run_cli("run", "--simulate", "--unwind", "fastest", "-o", self.path("bad.db"), "--",
                         sample("stack_shapes"), PLUGIN, "1")
        self.assertEqual(result.returncode, 125, result.stderr)
        self.assertIn("--unwind", result.stderr)
        self.assertFalse(os.path.exists(self.path("bad.db")))

    def test_libunwind_alone_gives_the_same_stacks(self):
        _, fast = self.profile()
        _, slow = self.profile("--unwind", "libunwind", name="libunwind.db")
        self.assertGreater(int(self.meta["stack_walks_libunwind"]), 0)
        def frames(report):  # all but the addresses, which differ between two runs (ASLR)
            return [[{k: v for k, v in frame.items() if k != "pc"} for frame in leak["stack"]]
                    for leak in report["leaks"]]
        self.assertEqual(frames(fast), frames(slow))

    def test_no_stacks_leaves_every_stack_empty(self):
        truth, report = self.profile("--no-stacks")
        self.assertEqual(report["totals"]["leaked_allocations"], truth["leaked_allocations"])
        self.assertTrue(all(not leak["stack"] for leak in report["leaks"]), report["leaks"][:2])


if __name__ == "__main__":
    unittest.main()
