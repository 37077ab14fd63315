"""The app is unchanged by the profiler: stdout, stderr, exit code (or the signal that killed it), its own
signal handlers, Python's signal handling; and the trace stores no environment variables."""
import os
import re
import signal
import sqlite3
import subprocess
import sys
import unittest

from gmt_e2e import SOURCE, TraceDirTestCase, report_json, run_cli, sample
from reliability_util import preload_env, sim_env


def run(command, env, preexec_fn=None):
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)


def ignore_sighup():
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


class UnchangedTest(TraceDirTestCase):
    def compare(self, command, preexec_fn=None):
        """Runs `command` without and with the preloaded library: same stdout, stderr and status."""
        plain = run(command, sim_env(), preexec_fn)
        profiled = run(command, preload_env(self.path(f"t{len(os.listdir(self.dir))}.db")), preexec_fn)
        self.assertEqual(profiled.returncode, plain.returncode, profiled.stderr)
        self.assertEqual(profiled.stdout, plain.stdout)
        self.assertEqual(profiled.stderr, plain.stderr)
        return plain

    def test_output_and_exit_code(self):
        self.assertEqual(self.compare([sample("leaky")]).returncode, 0)
        self.assertEqual(self.compare([sample("threaded"), "4", "1000"]).returncode, 0)

    def test_output_and_exit_code_through_the_cli(self):
        plain = run([sample("leaky")], sim_env())
        result = run_cli("run", "--simulate", "-q", "-o", self.path("cli.db"), "--", sample("leaky"))
        self.assertEqual((result.returncode, result.stdout, result.stderr), (plain.returncode, plain.stdout, plain.stderr))

    def test_app_signal_handler_still_runs(self):
        plain = self.compare([sample("crashy"), "usr1"])
        self.assertEqual(plain.returncode, 3)
        self.assertIn("app: SIGUSR1 handler ran", plain.stdout)
        self.assertIn("app: after SIGUSR1", plain.stdout)

    def test_app_sigterm_handler_wins(self):
        plain = self.compare([sample("crashy"), "own-term"])
        self.assertEqual(plain.returncode, 42)
        self.assertIn("app: own SIGTERM handler ran", plain.stdout)

    def test_deaths_are_the_same_deaths(self):
        for mode, sig in (("segv", signal.SIGSEGV), ("abort", signal.SIGABRT), ("sigterm-self", signal.SIGTERM),
                          ("hup-self", signal.SIGHUP)):
            with self.subTest(mode=mode):
                self.assertEqual(self.compare([sample("crashy"), mode, "0"]).returncode, -sig)

    def test_ignored_signal_stays_ignored(self):
        plain = self.compare([sample("crashy"), "hup-self"], preexec_fn=ignore_sighup)
        self.assertEqual(plain.returncode, 0)
        self.assertIn("app: survived SIGHUP", plain.stdout)

    def test_python_signal_handling_unchanged(self):
        # Python installs KeyboardInterrupt only over SIG_DFL, and shows C handlers as None in getsignal():
        # with the library preloaded, both must look exactly as without it.
        script = ("import os, signal\n"
                  "print([str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)])\n"
                  "signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))\n"
                  "try:\n"
                  "    os.kill(os.getpid(), signal.SIGINT)\n"
                  "    signal.pause()\n"
                  "except KeyboardInterrupt:\n"
                  "    print('KeyboardInterrupt')\n")
        plain = self.compare([sys.executable, "-c", script])
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertIn("KeyboardInterrupt", plain.stdout)

    def test_trace_stores_no_environment(self):
        canary = "gmt-canary-7f3a9c"
        trace = self.path("env.db")
        args = ["usr1", "it's \"quoted\"; DROP TABLE events; --"]  # and no argument can change a query
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sample("crashy"), *args,
                         env={"GMT_TEST_CANARY": canary, "SECRET_TOKEN": canary})
        self.assertEqual(result.returncode, 3, result.stderr)
        report = report_json(trace)
        self.assertEqual(report["trace"]["command_line"], " ".join([sample("crashy"), *args]))
        with open(os.path.join(SOURCE, "schema", "trace_meta.h")) as f:
            block = re.search(r"namespace meta \{(.*?)\}", f.read(), re.S).group(1)
        allowed = set(re.findall(r'inline constexpr const char\* k\w+ = "(\w+)"', block))
        db = sqlite3.connect(trace)
        keys = {key for (key,) in db.execute("SELECT key FROM meta")}
        self.assertTrue(keys <= allowed, keys - allowed)
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            columns = [row[1] for row in db.execute(f'PRAGMA table_info("{table}")')]
            for column in columns:
                hits = db.execute(f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE ?',
                                  (f"%{canary}%",)).fetchone()[0]
                self.assertEqual(hits, 0, f"{table}.{column} holds an environment value")
        db.close()


if __name__ == "__main__":
    unittest.main()
