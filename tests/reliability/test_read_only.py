"""Reading never writes: `report` and `diff` leave the trace's directory exactly as they found it (names, sizes,
modification times), for a complete trace, a copy of one, an incomplete one and a stand-in. A trace is in WAL
mode, and before they opened it immutable, a read left -wal and -shm files beside it."""
import os
import shutil
import unittest

from gmt_e2e import TraceDirTestCase, run_cli, sample


def listing(directory):
    """Every entry's name, size and modification time in ns."""
    return {name: (os.stat(os.path.join(directory, name)).st_size, os.stat(os.path.join(directory, name)).st_mtime_ns)
            for name in os.listdir(directory)}


class ReadOnlyTest(TraceDirTestCase):
    def test_report_and_diff_change_nothing_beside_the_trace(self):
        traces = self.path("traces")
        os.mkdir(traces)
        leaky = os.path.join(traces, "leaky.db")
        result = run_cli("run", "--simulate", "-q", "-o", leaky, "--", sample("leaky"))
        self.assertEqual(result.returncode, 0, result.stderr)
        shutil.copy(leaky, os.path.join(traces, "copy.db"))
        killed = os.path.join(traces, "killed.db")
        result = run_cli("run", "--simulate", "-q", "-o", killed, "--", "sh", "-c", "kill -9 $$")
        self.assertEqual(result.returncode, 128 + 9, result.stderr)
        before = listing(traces)
        self.assertEqual(sorted(before), ["copy.db", "killed.db", "leaky.db"])
        out = self.path("out")  # the reports go elsewhere: only reading happens in `traces`
        commands = [("report", name, *fmt) for name in ("leaky.db", "copy.db", "killed.db")
                    for fmt in ([], ["--format", "json"], ["--format", "html"])]
        commands += [("diff", "leaky.db", "copy.db"), ("report", ".")]
        for command, *args in commands:
            with self.subTest(command=[command, *args]):
                paths = [os.path.join(traces, a) if a.endswith(".db") or a == "." else a for a in args]
                result = run_cli(command, *paths, "-o", out)
                self.assertIn(result.returncode, (0, 2), result.stderr)  # the merge names the stand-in
                self.assertEqual(listing(traces), before)


if __name__ == "__main__":
    unittest.main()
