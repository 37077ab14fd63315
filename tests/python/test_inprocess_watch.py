"""gpumemtrace_inprocess.watch: callbacks after the app imports a module, without importing it ourselves."""
import importlib
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.environ.get("GMT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                                "python"))
from gpumemtrace_inprocess import watch  # noqa: E402


class WatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The test's modules live in a folder of their own, removed after (every CI run left one in /tmp before).
        cls.folder = tempfile.mkdtemp(prefix="gmt-watch-")

    @classmethod
    def tearDownClass(cls):
        if cls.folder in sys.path:
            sys.path.remove(cls.folder)
        shutil.rmtree(cls.folder, ignore_errors=True)

    def make_module(self, name, body="VALUE = 42\n"):
        folder = self.folder
        with open(os.path.join(folder, name + ".py"), "w") as f:
            f.write(body)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        importlib.invalidate_caches()

    def test_callback_runs_after_the_module_executed_and_the_module_is_untouched(self):
        self.make_module("gmt_watch_a")
        seen = []
        watch.when_imported("gmt_watch_a", lambda m: seen.append(m.VALUE))
        self.assertEqual(seen, [])  # not imported by us
        self.assertNotIn("gmt_watch_a", sys.modules)
        import gmt_watch_a
        import gmt_watch_a as again  # noqa: F401  (a second import runs nothing)
        self.assertEqual(seen, [42])
        self.assertEqual(type(gmt_watch_a.__loader__).__name__, "SourceFileLoader")
        self.assertIs(gmt_watch_a.__spec__.loader, gmt_watch_a.__loader__)
        importlib.reload(gmt_watch_a)  # works with the real loader
        self.assertEqual(seen, [42])

    def test_already_imported_module_runs_the_callback_at_once(self):
        seen = []
        watch.when_imported("os", lambda m: seen.append(m is os))
        self.assertEqual(seen, [True])

    def test_a_failing_callback_does_not_fail_the_import(self):
        self.make_module("gmt_watch_b", "VALUE = 7\n")
        watch.when_imported("gmt_watch_b", lambda m: 1 / 0)
        later = []
        watch.when_imported("gmt_watch_b", lambda m: later.append(m.VALUE))
        import gmt_watch_b
        self.assertEqual(gmt_watch_b.VALUE, 7)
        self.assertEqual(later, [7])

    def test_a_module_that_fails_to_import_raises_as_usual(self):
        self.make_module("gmt_watch_c", "raise ImportError('not here')\n")
        seen = []
        watch.when_imported("gmt_watch_c", lambda m: seen.append(m))
        with self.assertRaises(ImportError):
            import gmt_watch_c  # noqa: F401
        self.assertEqual(seen, [])


if __name__ == "__main__":
    unittest.main()
