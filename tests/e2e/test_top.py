"""`gpumemtrace top` under the simulated runtime (cli/top_command.cpp, analysis/live/): one frame read from a process
while it runs (the leaking line named with its exact bytes, checked against the trace's own first events), from a
finished full trace and a finished aggregate trace (the sample's own count of its leak), one section per process for a
directory, and the errors with their exit codes."""
import os
import re
import sqlite3
import subprocess
import time
import unittest

from gmt_e2e import (CLI, TraceDirTestCase, find_leak, is_socket, marker_line, report_json, run_cli, sample,
                     stop_run, wait_for)

KV_BYTES = 64 * 1024  # service_loop's kept KV entry
ALLOC, FREE = 1, 2  # event_kinds.id of Alloc and Free (schema/trace_schema.h)
LEAK_LINE = f"service_loop.cu:{marker_line('service_loop.cu', 'LEAK-SITE: keep_kv_entry')}"


def section_lines(frame, heading):
    """The lines under `heading` (a line starting with it) up to the next unindented line."""
    lines = frame.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    body = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        body.append(line)
    return body


def site_bytes(line):
    """The exact bytes a site line of `top` shows: '64.00 KiB (65536 B)' or '512 B'."""
    exact = re.search(r"\((\d+) B\)", line) or re.search(r"(\d+) B", line)
    return int(exact.group(1))


def leak_line_of(lines):
    found = [line for line in lines if "keep_kv_entry" in line and LEAK_LINE in line]
    assert len(found) == 1, "\n".join(lines)
    return found[0]


class TopTest(TraceDirTestCase):
    def start_service(self, name, *args):
        """service_loop REQUESTS STACKS LEAK_EVERY SLEEP_US under `run`, once its trace's control socket is up."""
        trace = self.path(name)
        app = subprocess.Popen([CLI, "run", "--simulate", "-q", "-o", trace, "--", sample("service_loop"), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(stop_run, app)
        wait_for(lambda: is_socket(trace + ".ctl"), what=f"{trace}.ctl")
        return trace, app

    def top(self, *args):
        return run_cli("top", "--once", *args)

    def live_at_event(self, trace, last_id, stack_ids):
        """(bytes, allocations) of the stacks `stack_ids` live after the events with id <= last_id."""
        live = {}
        with sqlite3.connect(trace) as db:
            for kind, address, size, stack in db.execute(
                    "SELECT kind, address, size, stack_id FROM events WHERE id <= ? ORDER BY id", (last_id,)):
                if kind == ALLOC:
                    live[address] = (size, stack)
                elif kind == FREE:
                    live.pop(address, None)
        kept = [size for size, stack in live.values() if stack in stack_ids]
        return sum(kept), len(kept)

    def test_a_running_process_names_its_leaking_line_with_its_bytes(self):
        trace, app = self.start_service("svc.db", "20000", "100", "20", "150")
        time.sleep(2.5)
        result = self.top("--window", "1", trace)
        self.assertEqual(result.returncode, 0, result.stderr)
        frame = result.stdout
        self.assertIn("[running]", frame)
        self.assertIn(f"trace {trace}  at ", frame)
        events = int(re.search(r"  (\d+) events", frame).group(1))
        live = leak_line_of(section_lines(frame, "Top call sites by live bytes (CUDA allocations)"))
        # Over the last second the leak grew the most (the model, loaded earlier, did not grow), by whole entries.
        self.assertIn("Grown over the last 1.000 s", frame)
        grown = section_lines(frame, "Grown over the last ")
        self.assertIn("keep_kv_entry", grown[0])
        self.assertEqual(site_bytes(grown[0]) % KV_BYTES, 0)
        self.assertTrue(0 < site_bytes(grown[0]) < site_bytes(live), grown[0])
        self.assertRegex(frame, r"(?m)^  GPU 0 +CUDA +\S+ \S+ +peak ")
        # The PID of `gpumemtrace run` (Popen's) stands for its app: the same trace, the app's pid.
        by_launcher = self.top(str(app.pid))
        self.assertEqual(by_launcher.returncode, 0, by_launcher.stderr)
        self.assertIn(f"trace {trace}  at ", by_launcher.stdout)
        self.assertNotIn(f"pid {app.pid} ", by_launcher.stdout)
        app.wait(timeout=120)
        self.assertEqual(app.returncode, 0)
        # The frame was the trace's first `events` events (the writer commits prefixes): what the kept entries held
        # after them, replayed from the finished trace, is what top showed.
        leak = find_leak(report_json(trace), "keep_kv_entry")
        held, entries = self.live_at_event(trace, events, set(leak["stack_ids"]))
        self.assertGreater(entries, 0)
        self.assertEqual(site_bytes(live), held)
        self.assertIn(f"{entries} allocs", live)
        self.assertEqual(held, entries * KV_BYTES)

    def test_it_refreshes_until_the_process_ends_even_when_killed(self):
        trace, app = self.start_service("killed.db", "1000000", "50", "20", "200")
        pid = int(run_cli("ctl", trace, "status").stdout.split("ok pid ")[1].split()[0])
        with open(self.path("frames.txt"), "w") as out:
            watcher = subprocess.Popen([CLI, "top", "--interval", "0.2", trace], stdout=out, stderr=subprocess.PIPE,
                                       text=True)
            time.sleep(1.5)
            os.kill(pid, 9)  # the app, not `run`: its socket stays behind, its trace incomplete
            _, err = watcher.communicate(timeout=30)
            self.assertEqual(watcher.returncode, 0, err)
        app.wait(timeout=30)
        self.assertTrue(is_socket(trace + ".ctl"))
        with open(self.path("frames.txt")) as f:
            frames = re.findall(r"^pid \d+ .*\[(.*)\]$", f.read(), re.M)
        self.assertGreaterEqual(len(frames), 3, frames)
        self.assertEqual(frames[0], "running")
        self.assertEqual(frames[-1], "ended (trace incomplete)")
        self.assertEqual(frames.count("ended (trace incomplete)"), 1)

    def test_finished_traces_full_and_aggregate(self):
        for mode in ([], ["--aggregate"]):
            with self.subTest(mode=mode):
                trace = self.path(f"done{len(mode)}.db")
                result = run_cli("run", "--simulate", "-q", *mode, "-o", trace, "--", sample("service_loop"), "3000",
                                 "100", "50")
                self.assertEqual(result.returncode, 0, result.stderr)
                kept = int(re.search(r"kept_leaks=(\d+)", result.stdout).group(1))
                self.assertEqual(kept, 30)  # 60 entries kept, half freed at shutdown
                # Without --once too: the process has ended, so one frame and exit 0.
                for args in (["--once"], []):
                    shown = run_cli("top", *args, trace)
                    self.assertEqual(shown.returncode, 0, shown.stderr)
                    frame = shown.stdout
                    self.assertIn("[ended]", frame)
                    self.assertEqual(" (aggregate)" in frame, bool(mode))
                    live = leak_line_of(section_lines(frame, "Top call sites by live bytes"))
                    self.assertEqual(site_bytes(live), kept * KV_BYTES)
                    self.assertIn(f"{kept} allocs", live)
                    # Grown since the start (the run is shorter than the window): net what the line kept.
                    grown = leak_line_of(section_lines(frame, "Grown over the last "))
                    self.assertEqual(site_bytes(grown), kept * KV_BYTES)
                    self.assertIn("Failed allocations: 0", frame)

    def test_a_failed_allocation_is_listed(self):
        trace = self.path("oom.db")
        result = run_cli("run", "--simulate", "-q", "-o", trace, "--", sample("service_loop"), "200", "10", "50", "0",
                         "--oom-at-end")
        self.assertEqual(result.returncode, 0, result.stderr)
        frame = self.top(trace).stdout
        self.assertIn("Failed allocations: 1", frame)
        [failure] = section_lines(frame, "Failed allocations: 1")
        self.assertIn("1.00 PiB", failure)
        self.assertIn("out of memory", failure)

    def test_a_directory_shows_every_running_process(self):
        first, app1 = self.start_service("a.db", "40000", "50", "20", "300")
        second, app2 = self.start_service("b.db", "40000", "50", "20", "300")
        result = self.top(self.dir)
        self.assertEqual(result.returncode, 0, result.stderr)
        pids = re.findall(r"^pid (\d+) ", result.stdout, re.M)
        self.assertEqual(len(pids), 2, result.stdout)
        self.assertEqual({f"trace {first}", f"trace {second}"},
                         set(re.findall(r"trace \S+\.db", result.stdout)))
        # The same through the run's pattern.
        pattern = self.top(os.path.join(self.dir, "*.db"))
        self.assertEqual(pattern.returncode, 0, pattern.stderr)
        self.assertEqual(len(re.findall(r"^pid \d+ ", pattern.stdout, re.M)), 2)
        for app in (app1, app2):
            stop_run(app)

    def test_errors(self):
        missing = self.top(self.path("missing.db"))
        self.assertEqual(missing.returncode, 2, missing.stderr)
        self.assertIn("no such trace, directory or process", missing.stderr)
        nobody = self.top("999999999")
        self.assertEqual(nobody.returncode, 8, nobody.stderr)
        self.assertIn("no process 999999999", nobody.stderr)
        idle = self.top(self.dir)  # a directory where nothing runs
        self.assertEqual(idle.returncode, 8, idle.stderr)
        self.assertIn("no running process records into", idle.stderr)
        junk = self.path("junk.db")
        with open(junk, "w") as f:
            f.write("not a trace\n")
        unreadable = self.top(junk)
        self.assertEqual(unreadable.returncode, 2, unreadable.stderr)
        self.assertIn(junk, unreadable.stderr)


if __name__ == "__main__":
    unittest.main()
