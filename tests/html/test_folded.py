"""`report --format folded`: the exact lines for samples/leaky's leaks (outermost frame first, bytes equal
the JSON report's leaks) and for what was live at each device's peak; frames with ';' or line breaks stay
one frame."""
import os
import sqlite3
import unittest

from gmt_e2e import TraceDirTestCase, report_json, run_cli, sample

# samples/leaky's leak sites, as the innermost frame of each folded line, with their bytes.
LEAKY_SITES = {
    "(anonymous namespace)::load_weights(unsigned long)": 4194304,
    "(anonymous namespace)::make_workspace(unsigned long)": 3 * 262144,
    "(anonymous namespace)::async_scratch(CUstream_st*, unsigned long)": 524288,
    "(anonymous namespace)::stage_host_buffer(unsigned long)": 65536,
}


# The process and thread start frames that the folded format drops at the outer end of a stack (as the text
# report does: analysis/model/stack_view.h), with the unsymbolized libc/libstdc++ frames around them.
START_FUNCTIONS = {"_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_call_main",
                   "start_thread", "clone", "clone3", "__clone", "__clone3"}
RUNTIME_MODULES = ("libc.so", "libc-", "libstdc++", "libgcc_s", "ld-linux", "libm.so", "libpthread", "libdl")


def is_start_frame(frame):
    if frame["python"]:
        return False
    if frame["function"]:
        return frame["function"].split("@")[0] in START_FUNCTIONS  # __libc_start_main@@GLIBC_2.34
    return bool(frame["module"]) and os.path.basename(frame["module"]).startswith(RUNTIME_MODULES)


def folded_frame(frame):
    """A frame as the folded format names it: its function, else module+offset (what addr2line takes), else
    module@pc."""
    if frame["function"]:
        return frame["function"]
    if frame["module"] and frame["module_offset"]:
        return f"{os.path.basename(frame['module'])}+{frame['module_offset']}"
    if frame["module"]:
        return f"{os.path.basename(frame['module'])}@{frame['pc']}"
    return frame["pc"]


def folded_frames(stack):
    frames = list(stack)
    while frames and is_start_frame(frames[-1]):
        frames.pop()
    return ";".join(folded_frame(frame) for frame in reversed(frames or stack))


class FoldedTest(TraceDirTestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = TraceDirTestCase()
        cls.workdir.setUp()
        cls.trace = cls.workdir.path("leaky.db")
        result = run_cli("run", "--simulate", "-o", cls.trace, "--", sample("leaky"))
        assert result.returncode == 0, result.stderr
        cls.report = report_json(cls.trace)

    @classmethod
    def tearDownClass(cls):
        cls.workdir.tearDown()

    def folded(self, *args):
        result = run_cli("report", "--format", "folded", *args, self.trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout.splitlines()

    def test_leak_lines_are_exact(self):
        lines = self.folded()
        expected = [f"{folded_frames(leak['stack'])} {leak['bytes']}" for leak in self.report["leaks"]]
        self.assertEqual(lines, expected)
        by_site = {}
        for line in lines:
            stack, bytes_ = line.rsplit(" ", 1)
            frames = stack.split(";")
            self.assertIn("main", frames)
            self.assertLess(frames.index("main"), len(frames) - 1)  # outermost first: main before the site
            by_site[frames[-1]] = int(bytes_)
        self.assertEqual(by_site, LEAKY_SITES)

    def test_output_file_equals_stdout(self):
        out = self.workdir.path("leaks.folded")
        result = run_cli("report", "--format", "folded", "-o", out, self.trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            self.assertEqual(f.read().splitlines(), self.folded())

    def test_peak_lines_add_up_to_each_device_peak(self):
        lines = self.folded("--folded-of", "peak")
        totals = {}
        for line in lines:
            stack, bytes_ = line.rsplit(" ", 1)
            root = stack.split(";")[0]
            totals[root] = totals.get(root, 0) + int(bytes_)
        expected = {(f"device {p['device']}" if p["device"] >= 0 else "host memory"): p["bytes"]
                    for p in self.report["peak_stacks"]}
        self.assertEqual(totals, expected)
        for peak in self.report["peak_stacks"]:
            root = f"device {peak['device']}" if peak["device"] >= 0 else "host memory"
            for held in peak["stacks"]:
                self.assertIn(f"{root};{folded_frames(held['stack'])} {held['bytes']}", lines)

    def test_separators_in_a_frame_are_escaped(self):
        trace = self.workdir.path("odd.db")
        with open(self.trace, "rb") as src, open(trace, "wb") as dst:
            dst.write(src.read())
        leak = next(l for l in self.report["leaks"] if "load_weights" in l["stack"][0]["function"])
        db = sqlite3.connect(trace)
        with db:
            db.execute("UPDATE symbols SET function = ? WHERE pc = ?", ("odd;name\nnext", int(leak["stack"][0]["pc"], 16)))
        db.close()
        result = run_cli("report", "--format", "folded", trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), len(self.report["leaks"]))
        self.assertIn(f"odd%3Bname%0Anext {leak['bytes']}", "\n".join(lines))

    def test_merged_report_refuses_the_exported_formats(self):
        second = self.workdir.path("second.db")
        with open(self.trace, "rb") as src, open(second, "wb") as dst:
            dst.write(src.read())
        for fmt in ("folded", "html", "perfetto"):
            with self.subTest(format=fmt):
                result = run_cli("report", "--format", fmt, self.trace, second)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertIn(f"--format {fmt} applies to the report of one trace", result.stderr)
                self.assertEqual(result.stdout, "")

    def test_unknown_weight_is_refused(self):
        result = run_cli("report", "--format", "folded", "--folded-of", "frees", self.trace)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("--folded-of", result.stderr)


if __name__ == "__main__":
    unittest.main()
