"""Stacks stay exact with the stack cache and the stack taken in the runtime hook (recorder/stacks.h,
recorder/caller_stack.h): one allocation site reached through two callers gives two stacks, the same
recursion at two depths gives two stacks of the right lengths, and a module loaded, unloaded and loaded again
has its allocations attributed to its own function each time. The sample interleaves the paths, so a cached
stack is always looked up again after another one."""
import os
import unittest

from gmt_e2e import SAMPLES, TraceDirTestCase, marker_line, parse_truth, report_json, run_cli, sample

REPEATS = 5
PLUGIN = os.path.join(SAMPLES, "libstack_shapes_plugin.so")


def functions(leak):
    return [frame["function"] or "" for frame in leak["stack"]]


class StackShapesTest(TraceDirTestCase):
    def profile(self, *options):
        trace = self.path("stacks.db")
        result = run_cli("run", "--simulate", "-q", *options, "-o", trace, "--", sample("stack_shapes"), PLUGIN,
                         str(REPEATS))
        self.assertEqual(result.returncode, 0, result.stderr)
        return parse_truth(result.stdout)[0], report_json(trace)

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

    def test_no_stacks_leaves_every_stack_empty(self):
        truth, report = self.profile("--no-stacks")
        self.assertEqual(report["totals"]["leaked_allocations"], truth["leaked_allocations"])
        self.assertTrue(all(not leak["stack"] for leak in report["leaks"]), report["leaks"][:2])


if __name__ == "__main__":
    unittest.main()
