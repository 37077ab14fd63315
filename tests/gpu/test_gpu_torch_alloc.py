"""Framework allocators' own statistics on the GPU (allocator_stats): (a) samples/torch_fragmenting.py under the
default PyTorch allocator and under expandable segments: inactive split bytes from torch's own statistics, the
expandable_segments advice under the default, a lower peak under expandable segments, both in `gpumemtrace diff`;
(b) samples/torch_oom.py: the PyTorch out-of-memory section with the exact request and the allocator's figures;
(c) samples/cupy_pool.py and samples/jax_prealloc.py when CuPy / JAX are installed: samples of the CuPy pool and
of XLA's allocator, explained as cache/preallocation. Skips (77) without a GPU or PyTorch with CUDA."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, report_json  # noqa: E402
from test_gpu_samples import SKIP, have_gpu  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")


def has_module(module, check="True"):
    return subprocess.run([PYTHON, "-c", f"import {module}; assert {check}"], capture_output=True).returncode == 0


def sample_script(name):
    return os.path.join(SOURCE, "samples", name)


def rows(trace):
    with sqlite3.connect(trace) as db:
        return db.execute("SELECT device, allocator, trigger, in_use_bytes, reserved_bytes, inactive_split_bytes, "
                          "alloc_retries, ooms, request_bytes FROM allocator_stats ORDER BY time_ns").fetchall()


class GpuAllocatorStatsTest(TraceDirTestCase):
    def run_sample(self, name, script, env=None, args=()):
        trace = self.path(name + ".db")
        full_env = dict(os.environ)
        full_env.update(env or {})
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, sample_script(script), *args],
                                capture_output=True,
                                text=True, timeout=600, env=full_env)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertNotIn("statistics are off", result.stderr)
        return trace, result

    def test_a_fragmentation_default_vs_expandable_segments(self):
        if not has_module("torch", "torch.cuda.is_available()"):
            self.skipTest("no PyTorch with CUDA here")
        default, out = self.run_sample("default", "torch_fragmenting.py", {"PYTORCH_CUDA_ALLOC_CONF": ""})
        expandable, out_x = self.run_sample("expandable", "torch_fragmenting.py",
                                            {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        print("FIGURE", out.stdout.strip(), "|", out_x.stdout.strip())
        found = rows(default)
        self.assertTrue(found, f"no allocator_stats rows; the run's stderr:\n{out.stderr[-3000:]}")
        self.assertEqual({r[1] for r in found}, {1})  # TorchCaching
        self.assertEqual({r[1] for r in rows(expandable)}, {2})  # TorchExpandable
        # Range ends are sampled at most once per 10 ms (the last end of a burst always): 12 quick "round"s gave 3.
        self.assertGreaterEqual(sum(1 for r in found if r[2] == 2), 1)
        self.assertEqual([r[2] for r in found][-1], 4)  # the exit sample

        base = report_json(default)["allocator_stats"]["devices"][0]
        new = report_json(expandable)["allocator_stats"]["devices"][0]
        # The figure is torch's own: the exit sample equals what the app printed from torch.cuda.memory_stats.
        printed = dict(item.split("=") for item in out.stdout.split("torch: ")[1].split())
        self.assertEqual(base["in_use_at_end_bytes"], int(printed["allocated"]))
        self.assertEqual(base["reserved_at_end_bytes"], int(printed["reserved"]))
        self.assertGreater(base["peak_inactive_split_bytes"], 0)
        print(f"FIGURE peak inactive split: default {base['peak_inactive_split_bytes']} B of "
              f"{base['reserved_at_peak_inactive_split_bytes']} B reserved, expandable {new['peak_inactive_split_bytes']} B; "
              f"peak reserved {base['peak_reserved_bytes']} vs {new['peak_reserved_bytes']}")
        self.assertTrue(base["fragmented"], base)
        self.assertIn("expandable_segments:True", base["advice"])
        self.assertIsNone(new["advice"])
        self.assertLess(new["peak_inactive_split_bytes"], base["peak_inactive_split_bytes"])
        text = subprocess.run([CLI, "report", default], capture_output=True, text=True).stdout
        self.assertIn("inactive split bytes: peak", text)
        self.assertIn("advice: ", text)

        diff = json.loads(subprocess.run([CLI, "diff", "--format", "json", default, expandable], capture_output=True,
                                         text=True).stdout)
        [entry] = diff["allocators"]
        self.assertEqual(entry["base"]["peak_inactive_split_bytes"], base["peak_inactive_split_bytes"])
        self.assertEqual(entry["new"]["peak_inactive_split_bytes"], new["peak_inactive_split_bytes"])
        print(subprocess.run([CLI, "diff", default, expandable], capture_output=True, text=True).stdout)

    def test_b_pytorch_oom_section(self):
        if not has_module("torch", "torch.cuda.is_available()"):
            self.skipTest("no PyTorch with CUDA here")
        trace, out = self.run_sample("oom", "torch_oom.py")
        request = int(out.stdout.split("request_bytes=")[1].split()[0])
        report = report_json(trace)
        [oom] = report["allocator_stats"]["ooms"]
        # PyTorch's observer reports the size its allocator asked for: the tensor's size rounded up to its block
        # granularity (measured: +64 KiB for a request of the GPU's total + 1 GiB).
        self.assertGreaterEqual(oom["request_bytes"], request)
        self.assertLess(oom["request_bytes"], request + (2 << 20))
        self.assertEqual(oom["allocator"], "pytorch_caching")
        self.assertGreaterEqual(oom["in_use_bytes"], 1 << 30)  # the held tensor
        self.assertGreaterEqual(oom["reserved_bytes"], oom["in_use_bytes"])
        self.assertIsNotNone(oom["inactive_split_bytes"])
        self.assertGreaterEqual(oom["ooms"], 1)
        self.assertGreaterEqual(oom["cuda_live_bytes"], 1 << 30)
        python = [f for f in oom["top_stacks"][0]["stack"] if f["python"]]
        self.assertTrue(any(f["file"].endswith("torch_oom.py") for f in python), oom["top_stacks"][0]["stack"])
        print(f"FIGURE PyTorch OOM: request {request} B, in use {oom['in_use_bytes']}, reserved {oom['reserved_bytes']}, "
              f"device free {oom['device_free']}, CUDA-level failure {oom['cuda_failure_event_id']}")
        text = subprocess.run([CLI, "report", trace], capture_output=True, text=True).stdout
        self.assertIn("PyTorch out of memory (1)", text)
        self.assertIn(f"({oom['request_bytes']} B)", text)

    def test_c_cupy_pool_is_cache(self):
        if not has_module("cupy"):
            self.skipTest("no CuPy here")
        trace, out = self.run_sample("cupy", "cupy_pool.py")
        found = rows(trace)
        self.assertTrue(found)
        self.assertEqual({r[1] for r in found}, {4})  # CupyPool
        device = report_json(trace)["allocator_stats"]["devices"][0]
        printed = dict(item.split("=") for item in out.stdout.split("cupy: ")[1].split())
        self.assertEqual(device["reserved_at_end_bytes"], int(printed["total"]))
        self.assertGreater(device["cached_at_end_bytes"], 0)
        self.assertIn("not a leak", device["cache"])
        text = subprocess.run([CLI, "report", trace], capture_output=True, text=True).stdout
        self.assertIn("CuPy's pool of freed blocks, not a leak", text)

    def test_c_jax_preallocation_is_not_a_leak(self):
        if not has_module("jax", "any(d.platform == 'gpu' for d in __import__('jax').devices())"):
            self.skipTest("no JAX with a GPU here")
        trace, out = self.run_sample("jax", "jax_prealloc.py")
        found = rows(trace)
        self.assertTrue(found)
        self.assertEqual({r[1] for r in found}, {5})  # JaxXla
        device = report_json(trace)["allocator_stats"]["devices"][0]
        printed = dict(item.split("=") for item in out.stdout.split("jax: ")[1].split())
        self.assertGreater(device["peak_reserved_bytes"], 0)
        if printed["pool_bytes"] != "None":
            self.assertEqual(device["reserved_at_end_bytes"], int(printed["pool_bytes"]))
        text = subprocess.run([CLI, "report", trace], capture_output=True, text=True).stdout
        self.assertIn("JAX's preallocated pool, not a leak", text)
        print(f"FIGURE JAX: in use {device['in_use_at_end_bytes']} B of a {device['reserved_at_end_bytes']} B pool")
        # A normal exit: JAX tears its backend down at exit and frees the arena (jax 0.11 on the H200), so it is
        # neither cached nor leaked at exit; the trace saw it (the peak holds it).
        report = report_json(trace)
        pool = device["peak_reserved_bytes"]
        self.assertGreaterEqual(report["totals"]["peak_bytes"], pool)
        self.assertLess(report["totals"]["leaked_bytes"], pool)
        arena = [h for h in report["cached_at_exit"]["heaps"] if h["source"] == "xla_arena"]
        print(f"FIGURE JAX normal exit: arena entries at exit {len(arena)}, "
              f"{report['totals']['leaked_bytes']} B leaked, peak {report['totals']['peak_bytes']} B")
        # Without JAX's teardown (os._exit) the arena is still reserved at exit: cached by JAX/XLA's arena.
        trace, out = self.run_sample("jax-no-cleanup", "jax_prealloc.py", args=["--exit-without-cleanup"])
        report = report_json(trace)
        text = subprocess.run([CLI, "report", trace], capture_output=True, text=True).stdout
        cached = report["cached_at_exit"]
        arena = [h for h in cached["heaps"] if h["source"] == "xla_arena"]
        self.assertEqual(len(arena), 1, cached)
        arena = arena[0]
        self.assertEqual((arena["cached"], arena["opaque"], arena["in_leaks"], arena["blocks_recorded"]),
                         (True, True, False, False))
        self.assertGreaterEqual(arena["reserved_bytes"], pool)
        self.assertGreaterEqual(cached["bytes"], arena["reserved_bytes"])
        self.assertFalse(cached["verdict_complete"])
        leaked = report["totals"]["leaked_bytes"]
        self.assertLess(leaked, arena["reserved_bytes"])  # the ~75% of the GPU is not in the leaks
        self.assertFalse([a for a in report["allocators"] if a["leaked_bytes"] >= arena["reserved_bytes"]])
        self.assertIn("by JAX/XLA's preallocated arena (not a leak; no verdict on JAX's buffers in it: per-buffer "
                      "truth needs XLA_PYTHON_CLIENT_ALLOCATOR=platform", text)
        self.assertIn("XLA_PYTHON_CLIENT_PREALLOCATE=false", text)
        self.assertIn("cached at exit by JAX/XLA's preallocated arena", out.stderr)
        self.assertNotIn("no leaks: every allocation was freed", out.stderr)
        print(f"FIGURE JAX arena at os._exit: {arena['reserved_bytes']} B in {arena['reserved_allocations']} "
              f"allocations cached at exit, {leaked} B leaked")

    def test_d_jax_platform_allocator_has_no_arena(self):
        if not has_module("jax", "any(d.platform == 'gpu' for d in __import__('jax').devices())"):
            self.skipTest("no JAX with a GPU here")
        env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
        trace, out = self.run_sample("jax-platform", "jax_prealloc.py", env)
        report = report_json(trace)
        arena = [h for h in report["cached_at_exit"]["heaps"] if h["source"] == "xla_arena"]
        # XLA's frames name their functions where jaxlib keeps its symbols: then no buffer is taken for the arena.
        # Where they are stripped the arena is assumed (docs/analysis.md): the figure says which this jaxlib is.
        print(f"FIGURE JAX platform: arena entries {arena}, {report['totals']['leaked_bytes']} B leaked, "
              f"allocators {[(a['id'], a['leaked_bytes']) for a in report['allocators']]}")
        self.assertLess(report["totals"]["leaked_bytes"] + report["cached_at_exit"]["bytes"], 8 << 30)


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
