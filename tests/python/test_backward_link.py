"""Tensors that autograd's worker threads allocate, linked to the backward() line of the thread that called it
(python/gpumemtrace_inprocess/autograd_calls.py marks the calls; analysis/model/event_pass.cpp links), against the fake
torch of fixtures_tracker/ (a labelled TEST FIXTURE: its backward pass allocates the gradient on a native worker thread
with no Python frames, as PyTorch's engine does) under the simulated runtime: the gradients' leak is shown "during
backward() at" the loop's line, beside the worker's own stack; when two backward() calls run at once, "during
backward()" without a line. The GPU suite (tests/gpu/test_gpu_answers.py) runs it against the real PyTorch."""
import os
import sqlite3
import sys
import unittest

from gmt_e2e import line_of, TraceDirTestCase, report_json, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "autograd_app.py")
FIXTURE = os.environ["GMT_TRACKER_FIXTURE"]
STEPS = 20
AUTOGRAD_BEGIN, AUTOGRAD_END = 25, 26


def marker(text):
    return line_of(APP, text)


class BackwardLinkTest(TraceDirTestCase):
    def run_app(self, name, *app_args):
        trace = self.path(name)
        result = run_cli("run", "--simulate", "-o", trace, "--", sys.executable, APP, str(STEPS), *app_args,
                         env={"PYTHONPATH": FIXTURE, "GMT_TORCH_BRIDGE_CACHE": self.path("bridge-cache")})
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("done True", result.stdout)
        return trace, result.stderr

    def test_the_gradients_leak_is_linked_to_the_backward_line(self):
        trace, stderr = self.run_app("link.db")
        with sqlite3.connect(trace) as db:
            begins = db.execute("SELECT count(*) FROM events WHERE kind = ? AND stack_id != 0",
                                (AUTOGRAD_BEGIN,)).fetchone()[0]
            ends = db.execute("SELECT count(*) FROM events WHERE kind = ?", (AUTOGRAD_END,)).fetchone()[0]
        self.assertEqual((begins, ends), (STEPS, STEPS))
        report = report_json(trace)
        line = marker("BACKWARD-LINE")
        gradients = [leak for leak in report["leaks"] if leak["during"]]
        self.assertEqual(len(gradients), 1, [leak["python_line"] for leak in report["leaks"]])
        [gradient] = gradients
        self.assertEqual((gradient["bytes"], gradient["count"]), (STEPS << 20, STEPS))
        self.assertTrue(gradient["during"]["caller_known"])
        self.assertEqual(gradient["during"]["python_line"], f"{APP}:train:{line}")
        # Beside the worker's own stack, which it does not change: no Python frame in it.
        self.assertFalse([frame for frame in gradient["stack"] if frame["python"]], gradient["stack"])
        # The parameters, made on the calling thread at their own line, carry no link.
        params = [leak for leak in report["leaks"] if not leak["during"]]
        self.assertEqual([leak["python_line"] for leak in params], [f"{APP}:train:{marker('PARAM-LINE')}"])
        finding = [f for f in report["findings"] if f["during"]]
        self.assertEqual([f["during"] for f in finding], [f"during backward() at train {APP}:{line}"])
        text = run_cli("report", trace).stdout
        self.assertIn(f"    made by autograd's worker threads during backward() at train {APP}:{line}\n", text)
        self.assertIn(f"       during backward() at train {APP}:{line}\n", stderr)

    def test_overlapping_backward_calls_link_without_a_line(self):
        trace, _ = self.run_app("overlap.db", "--overlap")
        report = report_json(trace)
        unknown = [leak for leak in report["leaks"] if leak["during"] and not leak["during"]["caller_known"]]
        self.assertEqual(len(unknown), 1, [leak["during"] for leak in report["leaks"]])
        self.assertEqual((unknown[0]["bytes"], unknown[0]["count"]), (2 * (3 << 20), 2))
        self.assertIsNone(unknown[0]["during"]["python_line"])
        known = [leak for leak in report["leaks"] if leak["during"] and leak["during"]["caller_known"]]
        self.assertEqual([leak["count"] for leak in known], [STEPS])
        findings = [f["during"] for f in report["findings"] if f["during"]]
        self.assertIn("during backward() (of several running at once)", findings)

    def test_another_thread_allocating_during_backward_is_not_linked(self):
        trace, _ = self.run_app("bystander.db", "--bystander")
        report = report_json(trace)
        line = f"{APP}:bystander:{marker('BYSTANDER-LINE')}"
        bystander = [leak for leak in report["leaks"] if leak["python_line"] == line]
        self.assertEqual(len(bystander), 1, [leak["python_line"] for leak in report["leaks"]])
        self.assertEqual((bystander[0]["bytes"], bystander[0]["count"]), (5 << 20, 1))
        self.assertIsNone(bystander[0]["during"], "a thread with its own user line was linked to backward()")
        # The gradient of that call, made on the worker, is still linked.
        linked = [leak for leak in report["leaks"] if leak["during"] and leak["during"]["caller_known"]]
        self.assertEqual(sum(leak["count"] for leak in linked), STEPS + 1)


if __name__ == "__main__":
    unittest.main()
