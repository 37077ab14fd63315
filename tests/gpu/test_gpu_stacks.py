"""The GPU suite for stacks under each backend. With a shared cudart, the driver-level backends (CUPTI, the
driver hooks) take an allocation's stack in the cudart hook before the call (recorder/caller_stack.h) instead
of walking out of libcupti/libcuda: the stacks must be exactly those of the runtime backend, frame for frame.
With a static cudart (no runtime hook) the stack is still taken in the callback and cut there. Also
stack_shapes (two callers of one site, two recursion depths, a module loaded twice) under each backend.
Skips (exit 77) without a GPU."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from gmt_e2e import (SAMPLES, TraceDirTestCase, marker_line, parse_truth, report_json,  # noqa: E402
                     run_cli, sample)
from test_gpu_samples import SKIP, have_gpu  # noqa: E402

BACKENDS = ("runtime", "cupti", "hooks")
PLUGIN = os.path.join(SAMPLES, "libstack_shapes_plugin.so")


def stacks_of(report):
    """{(bytes, count): [(function, file, line), ...]} for every leak group."""
    return {(leak["bytes"], leak["count"]): [(f["function"], f["file"], f["line"]) for f in leak["stack"]]
            for leak in report["leaks"]}


class StacksUnderEachBackendTest(TraceDirTestCase):
    def profile(self, backend, name, *args):
        trace = self.path(f"{name}-{backend}.db")
        result = run_cli("run", "--backend", backend, "-o", trace, "--", sample(name), *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        report = report_json(trace)
        self.assertEqual(report["trace"]["backend"], backend, result.stderr)
        return parse_truth(result.stdout)[0], report

    def test_shared_cudart_stacks_equal_the_runtime_backends(self):
        # leaky: cudaMalloc, cudaMallocManaged, cudaMallocHost and cudaMallocAsync through a shared cudart.
        stacks = {}
        for backend in BACKENDS:
            truth, report = self.profile(backend, "leaky")
            self.assertEqual(report["totals"]["leaked_bytes"], truth["leaked_bytes"], backend)
            stacks[backend] = stacks_of(report)
            for key, frames in stacks[backend].items():
                self.assertTrue(frames and frames[0][1] and frames[0][1].endswith("samples/leaky.cu"),
                                f"{backend} {key}: {frames[:3]}")
                self.assertIn("main", [f[0] for f in frames], f"{backend} {key}")
        for backend in ("cupti", "hooks"):
            with self.subTest(backend=backend):
                self.assertEqual(stacks[backend], stacks["runtime"])

    def test_stack_shapes_under_each_backend(self):
        leaf = marker_line("stack_shapes.cu", "LEAF-SITE")
        plugin_line = marker_line("stack_shapes_plugin.cu", "PLUGIN-SITE")
        stacks = {}
        for backend in BACKENDS:
            with self.subTest(backend=backend):
                truth, report = self.profile(backend, "stack_shapes", PLUGIN, "5")
                self.assertEqual(report["totals"]["leaked_allocations"], truth["leaked_allocations"])
                by_size = {leak["bytes"] // leak["count"]: leak for leak in report["leaks"]}
                for size, caller in ((1000, "caller_a"), (2000, "caller_b")):
                    names = [f["function"] or "" for f in by_size[size]["stack"]]
                    self.assertEqual(by_size[size]["stack"][0]["line"], leaf)
                    self.assertTrue(any(caller in n for n in names[1:3]), names)
                for size, frames in ((3000, 4), (6000, 7)):
                    names = [f["function"] or "" for f in by_size[size]["stack"]]
                    self.assertEqual(sum("recurse" in n for n in names), frames, names)
                plugin = [leak for leak in report["leaks"] if leak["stack"] and
                          "plugin_alloc" in (leak["stack"][0]["function"] or "")]
                self.assertEqual(sum(leak["count"] for leak in plugin), 2)
                self.assertTrue(all(leak["stack"][0]["line"] == plugin_line for leak in plugin))
                # The module's groups depend on where each load was mapped: compared above, not here.
                stacks[backend] = {key: frames for key, frames in stacks_of(report).items()
                                   if "plugin_alloc" not in (frames[0][0] or "")}
        for backend in ("cupti", "hooks"):
            with self.subTest(compare=backend):
                self.assertEqual(stacks[backend], stacks["runtime"])


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
