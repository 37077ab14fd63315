"""Apps built with -fsanitize=address or -fsanitize=thread can be profiled: the sanitizer runtime calls our
exported dlsym while it initializes (interpose/dlsym_override.cpp must answer without instrumented code or
intercepted libc calls), and `run` preloads the app's sanitizer runtime before our library (ASan insists on
being first). The app's stdout, stderr and exit code are those of a run without the profiler, and the trace
holds its exact leaks."""
import os
import subprocess
import unittest

from gmt_e2e import TraceDirTestCase, parse_truth, report_json, run_cli
from reliability_util import RELIABILITY_BIN, preload_env, sim_env

EXIT_CODE = "3"  # the app exits with what it is given: passed through unchanged


def app(sanitizer):
    return os.path.join(RELIABILITY_BIN, f"sanitized_app_{sanitizer}")


class SanitizedAppTest(TraceDirTestCase):
    def check_app(self, sanitizer):
        program = app(sanitizer)
        if not os.path.exists(program):
            self.skipTest(f"the compiler cannot build -fsanitize={sanitizer} programs here")
        plain = subprocess.run([program, EXIT_CODE], env=sim_env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(plain.returncode, int(EXIT_CODE), plain.stderr)
        truth = parse_truth(plain.stdout)[0]
        self.assertEqual(truth["leaked_bytes"], (1 << 20) + 3000 + 777)

        trace = self.path(f"{sanitizer}.db")
        profiled = run_cli("run", "--simulate", "-q", "-o", trace, "--", program, EXIT_CODE, timeout=120)
        self.assertEqual(profiled.returncode, int(EXIT_CODE), profiled.stderr)
        self.assertEqual(profiled.stdout, plain.stdout)
        self.assertEqual(profiled.stderr, plain.stderr)
        report = report_json(trace)
        self.assertTrue(report["trace"]["complete"])
        self.assertEqual(report["totals"]["allocations"], 103)
        self.assertEqual(report["totals"]["frees"], 100)
        self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"])
        self.assertEqual(report["totals"]["leaked_allocations"], truth["leaked_allocations"])
        leak_functions = {leak["stack"][0]["function"] for leak in report["leaks"] if leak["stack"]}
        self.assertTrue(any(f and "leak_device_buffer" in f for f in leak_functions), leak_functions)
        return plain, truth

    def test_address_sanitizer_app(self):
        plain, truth = self.check_app("address")
        # Preloaded by hand, our library first: ASan's link-order check must be turned off, and then the
        # sanitizer's first dlsym calls reach our router before ASan is initialized.
        trace = self.path("by-hand.db")
        options = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
        by_hand = subprocess.run([app("address"), EXIT_CODE], env=preload_env(trace, ASAN_OPTIONS=options),
                                 capture_output=True, text=True, timeout=120)
        self.assertEqual(by_hand.returncode, int(EXIT_CODE), by_hand.stderr)
        self.assertEqual(by_hand.stdout, plain.stdout)
        self.assertNotIn("AddressSanitizer", by_hand.stderr)
        self.assertEqual(report_json(trace)["totals"]["leaked_bytes"], truth["leaked_bytes"])

    def test_thread_sanitizer_app(self):
        self.check_app("thread")


if __name__ == "__main__":
    unittest.main()
