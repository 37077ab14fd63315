"""The progress line of `report` (and of symbolizing): drawn on stderr when it is a terminal, erased when
done, and absent when stderr is a pipe or a file."""
import os
import pty
import subprocess
import tempfile
import unittest

from gmt_e2e import CLI, TraceDirTestCase, run_cli, sample


def run_with_terminal_stderr(*args):
    """Runs the CLI with stderr on a pseudo-terminal; returns (exit code, stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    # stdout to a file: a pipe nobody reads while the terminal is drained would fill up and block the CLI.
    stdout_file = tempfile.TemporaryFile()
    process = subprocess.Popen([CLI, *args], stdout=stdout_file, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait()
    stdout_file.seek(0)
    stdout = stdout_file.read()
    stdout_file.close()
    os.close(leader)
    return process.returncode, stdout, b"".join(chunks).decode(errors="replace")


class ProgressTest(TraceDirTestCase):
    def setUp(self):
        super().setUp()
        # 8 threads x 5000 alloc+free pairs: 80000 events, past the 65536 events between two progress calls.
        self.trace = self.path("threaded.db")
        result = run_cli("run", "--simulate", "--no-symbolize", "-o", self.trace, "--", sample("threaded"), "8", "5000")
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_terminal_gets_a_progress_line_that_is_erased(self):
        code, stdout, terminal = run_with_terminal_stderr("report", "--format", "json", self.trace)
        self.assertEqual(code, 0, terminal)
        self.assertIn(f"\rgpumemtrace: analyzing {self.trace}: ", terminal)
        self.assertIn(" events", terminal)
        self.assertTrue(terminal.endswith("\r\x1b[K"), repr(terminal[-80:]))  # erased: the report follows cleanly
        self.assertTrue(stdout.startswith(b"{"))

    def test_pipe_gets_no_progress(self):
        result = run_cli("report", "--format", "json", self.trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")

    def test_symbolizing_on_a_terminal_then_quiet_on_a_pipe(self):
        code, _, terminal = run_with_terminal_stderr("symbolize", self.trace)
        self.assertEqual(code, 0, terminal)
        self.assertIn(f"\rgpumemtrace: symbolizing {self.trace}: ", terminal)
        self.assertNotIn("\n", terminal.replace("\r\n", ""))  # no stray line left behind
        result = run_cli("symbolize", self.trace)  # nothing left to do, and stderr is a pipe
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("\r", result.stderr)


if __name__ == "__main__":
    unittest.main()
