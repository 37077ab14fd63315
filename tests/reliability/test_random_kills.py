"""20 kills at random moments: 20 readable traces. The app (not the CLI) gets SIGKILL between 50 and 500 ms
after it started allocating; SIGKILL cannot be caught, so each trace holds what the 200 ms periodic flush
committed, and says it is incomplete."""
import os
import random
import signal
import time
import unittest

from gmt_e2e import TraceDirTestCase, report_json, sample
from reliability_util import child_pid_of, start_cli_run, wait_for_line

KILLS = 20


class RandomKillsTest(TraceDirTestCase):
    def test_twenty_kills_twenty_readable_traces(self):
        seed = int(os.environ.get("GMT_KILL_SEED", time.time_ns() % 1000000))
        rng = random.Random(seed)
        moments = []
        for i in range(KILLS):
            delay = rng.uniform(0.05, 0.5)
            with self.subTest(kill=i, delay_ms=round(delay * 1000), seed=seed):
                trace = self.path(f"kill-{i}.db")
                cli = start_cli_run(trace, sample("crashy"), "busy-loop")
                app = child_pid_of(cli.pid)
                wait_for_line(cli, "running")  # the app made its first allocation: its trace exists
                time.sleep(delay)
                os.kill(app, signal.SIGKILL)
                _, stderr = cli.communicate(timeout=120)
                self.assertEqual(cli.returncode, 128 + signal.SIGKILL, stderr)
                report = report_json(trace)  # exit 0, or it raises
                self.assertFalse(report["trace"]["complete"])
                moments.append((round(delay * 1000), report["trace"]["event_count"]))
        print(f"seed {seed}; (kill ms, events kept): {sorted(moments)}")


if __name__ == "__main__":
    unittest.main()
