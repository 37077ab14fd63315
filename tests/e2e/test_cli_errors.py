"""Bad input gets a clear message and a non-zero exit code; the app's exit code passes through."""
import json
import os
import sqlite3
import subprocess
import unittest

from gmt_e2e import CLI, TraceDirTestCase, run_cli, sample


class RunErrorsTest(TraceDirTestCase):
    def test_exit_code_passes_through(self):
        result = run_cli("run", "-o", self.path("x.db"), "--", "sh", "-c", "exit 7")
        self.assertEqual(result.returncode, 7, result.stderr)

    def test_killed_app_reports_128_plus_signal(self):
        result = run_cli("run", "-o", self.path("x.db"), "--", "sh", "-c", "kill -9 $$")
        self.assertEqual(result.returncode, 128 + 9, result.stderr)
        self.assertIn("signal 9", result.stderr)

    def test_app_output_is_untouched(self):
        result = run_cli("run", "-q", "-o", self.path("x.db"), "--", "sh", "-c", "echo out; echo err >&2")
        self.assertEqual(result.stdout, "out\n")
        self.assertEqual(result.stderr, "err\n")

    def test_missing_app(self):
        result = run_cli("run", "-o", self.path("x.db"), "--", "./no-such-app")
        self.assertEqual(result.returncode, 127)
        self.assertIn("cannot run './no-such-app'", result.stderr)

    def test_not_executable(self):
        script = self.path("script.txt")
        open(script, "w").write("hello\n")
        result = run_cli("run", "-o", self.path("x.db"), "--", script)
        self.assertEqual(result.returncode, 126)

    def test_unknown_option(self):
        # In a temporary directory: were the option ever ignored, `true` would run and leave its default-named
        # trace (gpumemtrace.true.<pid>.db) in the working directory, which for ctest is the source tree.
        result = run_cli("run", "--no-such-option", "--", "true", cwd=self.dir)
        self.assertEqual(result.returncode, 125)
        self.assertIn("no-such-option", result.stderr)
        self.assertEqual(os.listdir(self.dir), [], "the app must not run after a bad option")

    def test_app_without_double_dash_after_options_with_values(self):
        # Without "--", the app starts at the first argument that is neither an option of `run` nor the value
        # of one (cli/main.cpp asks CLI11 which options take a value); "--" after the app's name is the app's.
        marker = self.path("ran")
        result = run_cli("run", "-q", "-o", self.path("x.db"), "--backend", "runtime", "--unwind", "fast",
                         "--nvtx-peak-step", "0", "--free-stacks", "sh", "-c", 'touch "$1"; exit 5', "sh", marker,
                         "--", "-o")
        self.assertEqual(result.returncode, 5, result.stderr)
        self.assertTrue(os.path.exists(marker), result.stderr)

    def test_no_command(self):
        result = run_cli()
        self.assertEqual(result.returncode, 2)

    def test_own_failures_are_125_like_env(self):
        # env(1) and timeout(1): 125 is the tool's own failure, so an app's exit code 1-124 is never mistaken for
        # ours. Each case: the app never runs.
        marker = self.path("ran")
        os.mkdir(self.path("readonly"), 0o555)
        cases = [
            (["--backend", "nosuch"], "--backend"),              # CLI11's own check
            (["--nvtx-peak-step", "lots"], "--nvtx-peak-step"),  # a malformed value
            (["--simulate", "--backend", "cupti"], "--backend cupti does not apply"),
            (["-o", self.path("t.%q.db")], "unknown sequence"),
            (["-o", self.path("readonly/t.db")], "cannot write the trace"),
            ([], "run needs the application"),
        ]
        for options, message in cases:
            if os.geteuid() == 0 and "readonly" in " ".join(options):
                continue  # root writes anywhere
            with self.subTest(options=options):
                args = ["run", *options] + ([] if not options else ["--", "touch", marker])
                result = run_cli(*args, cwd=self.dir)
                self.assertEqual(result.returncode, 125, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertFalse(os.path.exists(marker), "the app must not run after our own failure")

    def test_app_codes_125_to_127_pass_through_unchanged(self):
        for code in (1, 2, 124, 125, 126, 127, 255):
            with self.subTest(code=code):
                result = run_cli("run", "-q", "-o", self.path(f"c{code}.db"), "--", "sh", "-c", f"exit {code}")
                self.assertEqual(result.returncode, code, result.stderr)

    def test_exit_status_and_signal_are_stored_and_reported(self):
        for name, command, key, value, line in (
            ("status.db", "exit 7", "app_exit_status", 7, "exited with code 7"),
            ("signal.db", "kill -9 $$", "app_exit_signal", 9, "killed by signal 9"),
        ):
            with self.subTest(command=command):
                trace = self.path(name)
                result = run_cli("run", "-q", "-o", trace, "--", "sh", "-c", command)
                self.assertEqual(result.returncode, value if key == "app_exit_status" else 128 + value)
                with sqlite3.connect(trace) as db:
                    meta = dict(db.execute("SELECT key, value FROM meta"))
                self.assertEqual(meta.get(key), str(value))
                other = "app_exit_signal" if key == "app_exit_status" else "app_exit_status"
                self.assertNotIn(other, meta)
                text = run_cli("report", trace)
                self.assertIn(f"  app        {line}", text.stdout)
                report = run_cli("report", "--format", "json", trace)
                trace_json = json.loads(report.stdout)["trace"]
                self.assertEqual(trace_json[key], value)
                self.assertIsNone(trace_json[other])

    def test_existing_trace_is_not_overwritten(self):
        trace = self.path("exists.db")
        open(trace, "w").write("precious")
        marker = self.path("ran")
        result = run_cli("run", "-o", trace, "--", "touch", marker)
        self.assertEqual(result.returncode, 125)
        self.assertIn("--force", result.stderr)
        self.assertFalse(os.path.exists(marker), "the app must not run when the trace cannot be written")
        self.assertEqual(open(trace).read(), "precious")
        result = run_cli("run", "--force", "-o", trace, "--", "touch", marker)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(os.path.exists(marker))

    def test_output_directory_missing(self):
        result = run_cli("run", "-o", self.path("no/such/dir/x.db"), "--", "true")
        self.assertEqual(result.returncode, 125)
        self.assertIn("cannot write the trace", result.stderr)

    def test_unwritable_trace_inside_the_app_keeps_the_app_running(self):
        # Preloaded by hand with an output the library cannot create: one warning, the app's result unchanged.
        lib = os.path.join(os.path.dirname(CLI), "..", "lib", "gpumemtrace", "libgpumemtrace.so")
        sim = os.path.join(os.path.dirname(CLI), "..", "lib", "gpumemtrace", "sim")
        env = dict(os.environ, LD_PRELOAD=lib, LD_LIBRARY_PATH=sim, GMT_SIM_QUIET="1",
                   GMT_OUTPUT=self.path("missing-dir/t.db"))
        result = subprocess.run([sample("leaky")], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("truth:", result.stdout)
        self.assertEqual(result.stderr.count("gpumemtrace: cannot create trace"), 1, result.stderr)
        self.assertIn("continues without profiling", result.stderr)


class ReportErrorsTest(TraceDirTestCase):
    def check_bad(self, path, fragment):
        result = run_cli("report", path)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn(fragment, result.stderr)
        self.assertIn(os.path.basename(path), result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_missing(self):
        self.check_bad(self.path("missing.db"), "No such file")

    def test_empty(self):
        open(self.path("empty.db"), "w").close()
        self.check_bad(self.path("empty.db"), "empty")

    def test_not_sqlite(self):
        open(self.path("text.db"), "w").write("this is not a trace\n" * 10)
        self.check_bad(self.path("text.db"), "not an SQLite database")

    def test_foreign_sqlite(self):
        db = sqlite3.connect(self.path("foreign.db"))
        db.execute("CREATE TABLE t(x)")
        db.commit()
        db.close()
        self.check_bad(self.path("foreign.db"), "not a gpumemtrace trace")

    def real_trace(self, name):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sample("threaded"), "2", "3000")
        self.assertEqual(result.returncode, 0, result.stderr)
        return trace

    def test_newer_schema(self):
        trace = self.real_trace("newer.db")
        db = sqlite3.connect(trace)
        db.execute("PRAGMA user_version = 999")
        db.commit()
        db.close()
        self.check_bad(trace, "999")

    def test_truncated(self):
        # Salvaged (docs/reliability.md, "Damaged traces: salvage"): what could be read, marked incomplete, with
        # no verdict; reliability.test_damaged_traces checks the numbers.
        trace = self.real_trace("truncated.db")
        size = os.path.getsize(trace)
        with open(trace, "r+b") as f:
            f.truncate(size // 2)
        result = run_cli("report", trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("salvaged: the trace was damaged (truncated at", result.stderr)
        self.assertIn("truncated.db", result.stderr)
        # Whatever the surviving half holds (leaks or none), the report gives no verdict on it.
        self.assertRegex(result.stdout, r"the trace is incomplete: no verdict|not necessarily leaked")
        self.assertNotRegex(result.stdout, r"No leaks(?!.*no verdict)")
        self.assertEqual(run_cli("report", "--fail-on-leak", trace).returncode, 4)  # no verdict from it

    def test_bad_format_option(self):
        trace = self.real_trace("ok.db")
        result = run_cli("report", "--format", "xml", trace)
        self.assertEqual(result.returncode, 2)
        self.assertIn("xml", result.stderr)


if __name__ == "__main__":
    unittest.main()
