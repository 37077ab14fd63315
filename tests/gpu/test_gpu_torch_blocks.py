"""PyTorch's tensors on the GPU with the real PyTorch (on by default: the trace tracker attached by the bridge
that python/gpumemtrace_inprocess/torch_tracker.py builds against this torch; samples/torch_training_leak.py): the
bridge builds once into its cache; the leaking loop's block-level growth (over time and per repetition of the NVTX
step range) names the line that keeps the tensors (BLOCK-LEAK-SITE), which the CUDA level cannot; the fixed loop
has no block-level finding; every tensor allocation the allocator made is in the trace (its own count,
torch.cuda.memory_stats, against ours), in time order within the run; `--no-torch-blocks` records none; and
importing torch initializes no CUDA. Prints FIGURE lines for docs/gpu-results.md. Exits 77 without a GPU or
PyTorch."""
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from gmt_e2e import CLI, SOURCE, TraceDirTestCase, marker_line, report_json  # noqa: E402
from test_gpu_samples import SKIP, have_gpu, have_torch_cuda  # noqa: E402

PYTHON = os.environ.get("GMT_PYTHON", shutil.which("python3") or "python3")
SAMPLE = os.path.join(SOURCE, "samples", "torch_training_leak.py")
IMPORT_AUDIT = os.path.join(HERE, "import_audit.py")
STEPS = 200
# Fresh for each run of this suite, and its own: the other suites share gmt-gpu-torch-bridge-cache, and removing that
# one while a suite running beside this one (ctest -j) built its bridge there failed that build (FileNotFoundError).
CACHE = os.path.join(os.environ.get("TMPDIR", "/tmp"), "gmt-gpu-torch-blocks-bridge-cache")



class GpuTorchBlocksTest(TraceDirTestCase):
    figures = []

    @classmethod
    def setUpClass(cls):
        shutil.rmtree(CACHE, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        for line in cls.figures:
            print("FIGURE", line)

    def run_sample(self, name, *args, run_options=()):
        trace = self.path(name)
        # Through import_audit.py: should the app's own imports fail, the imports made by other threads meanwhile
        # are in the message.
        result = subprocess.run([CLI, "run", *run_options, "-o", trace, "--", PYTHON, IMPORT_AUDIT, SAMPLE, "--steps",
                                 str(STEPS), *args], capture_output=True, text=True, timeout=600,
                                env=dict(os.environ, GMT_TORCH_BRIDGE_CACHE=CACHE))
        imports = "\n".join(line for line in result.stderr.splitlines() if line.startswith("IMPORT"))
        self.assertEqual(result.returncode, 0, f"{imports}\n{result.stderr[-3000:]}")
        self.assertIn(f"steps {STEPS}", result.stdout)
        self.assertNotIn("not tracked", result.stderr)
        for line in result.stderr.splitlines():
            if "built the PyTorch bridge in" in line:
                self.figures.append(f"torch bridge: {line.split('gpumemtrace: ', 1)[-1]}")
        return trace, report_json(trace), result.stdout

    def block_rows(self, trace):
        with sqlite3.connect(trace) as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            allocs, frees, first, last = db.execute(
                "SELECT sum(kind = 1), sum(kind = 2), min(time_ns), max(time_ns) FROM events WHERE source = 4"
            ).fetchone()
        return meta, allocs or 0, frees or 0, first, last

    def test_leaking_loop_is_named_by_the_line_that_keeps_the_tensors(self):
        trace, report, stdout = self.run_sample("leak.db")
        site = f"{SAMPLE}:train_step:{marker_line('torch_training_leak.py', '# BLOCK-LEAK-SITE:')}"
        blocks = report["tensor_blocks"]
        self.assertIsNotNone(blocks)
        meta, allocs, frees, first, last = self.block_rows(trace)
        self.assertEqual(meta["tensor_blocks"], "1")
        self.assertEqual(meta["dropped_events"], "0")
        self.assertGreater(allocs, STEPS)  # several tensors per step
        # PyTorch's own count of the allocations it made (the sample prints memory_stats' allocation.all.allocated).
        self.assertIn(f"torch_allocations {allocs}", stdout)
        self.assertEqual(allocs, blocks["totals"]["allocations"])
        self.assertGreaterEqual(first, int(meta["start_monotonic_ns"]))
        self.assertLessEqual(last, int(meta["end_monotonic_ns"]))
        range_growth = [g for g in blocks["range_growth"] if g["name"] == "train step"]
        self.assertTrue(range_growth, "no block-level growth per repetition of 'train step'")
        self.assertEqual(range_growth[0]["stacks"][0]["python_line"], site, range_growth[0]["stacks"][0])
        # Growth over time is not asserted: the loop runs in the last second or two of the trace (the first seconds
        # are start-up), fewer windows than the growth rule asks for; growth per repetition is the robust figure.
        # The kept tensors are alive at exit, under the same line; at most the model's own tensors besides.
        alive = blocks["alive_at_exit"]
        self.assertTrue(alive and alive[0]["python_line"] == site, [a["python_line"] for a in alive])
        # Leaked is what the app held: the kept tensors are leaked as tensor blocks at their line; PyTorch's
        # segments are cached at exit, never leaked.
        self.assertEqual({k for leak in report["leaks"] if leak["python_line"] == site for k in leak["memory_kinds"]},
                         {"tensor_block"})
        self.assertGreater(report["totals"]["cached_at_exit_bytes"], 0)
        self.assert_no_segment_leaked(report)
        print(f"FIGURE torch blocks: {allocs} tensor blocks ({frees} freed) in {STEPS} steps; 'train step' keeps "
              f"{range_growth[0]['bytes_per_iteration'] / 2**20:.1f} MiB per repetition at {site}; alive at exit "
              f"{blocks['totals']['leaked_bytes'] / 2**20:.1f} MiB; CUDA-level peak {report['totals']['peak_bytes'] / 2**20:.1f} MiB")

    def test_sampled_block_stacks_keep_the_leak_line_and_count_every_block(self):
        # run --sample-block-stacks 1MiB (issue 33, option c): the kept activations (512 x 2048 floats, 4 MiB) all
        # take their stack, so the leak is named at its line as without the sample; smaller tensors (the loss
        # scalars) one per MiB allocated; every block is recorded (PyTorch's own count).
        trace, report, stdout = self.run_sample("sampled.db", run_options=("--sample-block-stacks", "1MiB"))
        site = f"{SAMPLE}:train_step:{marker_line('torch_training_leak.py', '# BLOCK-LEAK-SITE:')}"
        meta, allocs, _, _, _ = self.block_rows(trace)
        self.assertEqual(meta["block_stack_sample_bytes"], str(1 << 20))
        self.assertEqual(meta["dropped_events"], "0")
        self.assertIn(f"torch_allocations {allocs}", stdout)
        with sqlite3.connect(trace) as db:
            large_without, small, small_with = db.execute(
                "SELECT sum(size >= 1048576 AND stack_id = 0), sum(size < 1048576), sum(size < 1048576 AND "
                "stack_id != 0) FROM events WHERE source = 4 AND kind = 1").fetchone()
        self.assertEqual(large_without, 0)
        self.assertGreater(small, 0)
        self.assertLess(small_with, small)
        alive = report["tensor_blocks"]["alive_at_exit"]
        self.assertTrue(alive and alive[0]["python_line"] == site, [a["python_line"] for a in alive])
        range_growth = [g for g in report["tensor_blocks"]["range_growth"] if g["name"] == "train step"]
        self.assertTrue(range_growth and range_growth[0]["stacks"][0]["python_line"] == site, range_growth)
        self.assert_no_segment_leaked(report)
        print(f"FIGURE torch blocks, --sample-block-stacks 1MiB: {allocs} tensor blocks, {small} under 1 MiB of "
              f"which {small_with} took their stack; 'train step' keeps "
              f"{range_growth[0]['bytes_per_iteration'] / 2**20:.1f} MiB per repetition at {site}")

    def test_fixed_loop_has_no_block_level_finding(self):
        trace, report, _ = self.run_sample("fixed.db", "--fixed")
        blocks = report["tensor_blocks"]
        self.assertEqual(blocks["growth"]["findings"], [], blocks["growth"])
        self.assertEqual(blocks["range_growth"], [])
        _, allocs, _, _, _ = self.block_rows(trace)
        self.assertGreater(allocs, STEPS)
        print(f"FIGURE torch blocks, fixed loop: {allocs} tensor blocks, no block-level finding")

    def test_sixteen_threads_of_tensors_lose_nothing(self):
        trace = self.path("threads.db")
        program = (
            "import threading, torch\n"
            "torch.cuda.init()\n"
            "torch.empty(1, device='cuda')\n"
            "def churn(i):\n"
            "    for n in range(2000):\n"
            "        t = torch.empty(512 * (1 + (n + i) % 64), dtype=torch.uint8, device='cuda')\n"
            "        del t\n"
            "threads = [threading.Thread(target=churn, args=(i,)) for i in range(16)]\n"
            "[t.start() for t in threads]\n"
            "print('threads', ' '.join(str(t.native_id) for t in threads), flush=True)\n"
            "[t.join() for t in threads]\n"
            "print('torch_allocations', torch.cuda.memory_stats()['allocation.all.allocated'])\n")
        result = subprocess.run([CLI, "run", "-q", "-o", trace, "--", PYTHON, "-c", program], capture_output=True,
                                text=True, timeout=600, env=dict(os.environ, GMT_TORCH_BRIDGE_CACHE=CACHE))
        self.assertEqual(result.returncode, 0, result.stderr)
        seen = dict(line.split(" ", 1) for line in result.stdout.splitlines())
        threads = [int(t) for t in seen["threads"].split()]
        with sqlite3.connect(trace) as db:
            per_thread = dict(db.execute("SELECT thread_id, count(*) FROM events WHERE source = 4 AND kind = 1 "
                                         "GROUP BY thread_id").fetchall())
            frees = db.execute("SELECT count(*) FROM events WHERE source = 4 AND kind = 2").fetchone()[0]
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        self.assertEqual([per_thread.get(t) for t in threads], [2000] * 16)
        self.assertEqual(sum(per_thread.values()), int(seen["torch_allocations"]))
        self.assertEqual(frees, sum(per_thread.values()))  # every tensor was freed, the main thread's one too
        self.assertEqual(meta["dropped_events"], "0")
        self.figures.append(f"torch blocks, 16 threads x 2000 tensors: every allocation and free in the trace, "
                            f"per thread ({sum(per_thread.values())} allocations, PyTorch counted "
                            f"{seen['torch_allocations']})")

    def test_no_torch_blocks_records_no_tensor(self):
        trace = self.path("off.db")
        result = subprocess.run([CLI, "run", "--no-torch-blocks", "-q", "-o", trace, "--", PYTHON, SAMPLE, "--steps",
                                 "20"], capture_output=True, text=True, timeout=600)
        self.assertEqual(result.returncode, 0, result.stderr)
        meta, allocs, _, _, _ = self.block_rows(trace)
        self.assertNotIn("tensor_blocks", meta)
        self.assertEqual(allocs, 0)

    def test_importing_torch_initializes_no_cuda(self):
        trace = self.path("import.db")
        result = subprocess.run([CLI, "run", "-q", "-o", trace, "--", PYTHON, "-c",
                                 "import torch; print('initialized', torch.cuda.is_initialized())"],
                                capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, GMT_TORCH_BRIDGE_CACHE=CACHE))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("initialized False", result.stdout)
        if os.path.exists(trace):
            with sqlite3.connect(trace) as db:
                self.assertIsNone(db.execute("SELECT value FROM meta WHERE key = 'tensor_blocks'").fetchone())

    def assert_no_segment_leaked(self, report):
        """No CUDA-level allocation of PyTorch's caching allocator (a segment: DeviceCachingAllocator::alloc_block,
        or an expandable segment's map) is among the leaks: those are cached at exit."""
        for leak in report["leaks"]:
            if "tensor_block" in leak["memory_kinds"]:
                continue
            functions = " ".join(f["function"] or "" for f in leak["stack"])
            self.assertNotIn("alloc_block", functions, leak["python_line"])
            self.assertNotIn("ExpandableSegment", functions, leak["python_line"])

    # samples/torch_dict_leak.py: leaked is what the app held, at its own lines; PyTorch's segments are cached.
    def run_dict_leak(self, name, *args):
        trace = self.path(name)
        sample = os.path.join(SOURCE, "samples", "torch_dict_leak.py")
        result = subprocess.run([CLI, "run", "-o", trace, "--", PYTHON, sample, *args], capture_output=True,
                                text=True, timeout=600, env=dict(os.environ, GMT_TORCH_BRIDGE_CACHE=CACHE))
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        seen = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        return trace, report_json(trace), seen, result.stderr

    def check_dict_leak(self, report, seen, stderr, over_time=True):
        keep = f"{SOURCE}/samples/torch_dict_leak.py:handle:{marker_line('torch_dict_leak.py', '# DICT-KEEP')}"
        weights = f"{SOURCE}/samples/torch_dict_leak.py:<module>:{marker_line('torch_dict_leak.py', '# WEIGHTS')}"
        self.assertEqual(report["trace"]["dropped_events"], 0)
        by_line = {leak["python_line"]: leak for leak in report["leaks"] if leak["python_line"]}
        self.assertIn(keep, by_line, list(by_line))
        self.assertEqual(by_line[keep]["bytes"], int(seen["kept_bytes"]))  # to the byte
        self.assertEqual(by_line[keep]["count"], int(seen["kept_tensors"]))
        self.assertIn(weights, by_line, list(by_line))
        self.assertEqual(by_line[weights]["bytes"], int(seen["weights_bytes"]))
        # No segment PyTorch merely cached is leaked: its reservation at exit is cached_at_exit, to the byte.
        self.assertEqual(report["totals"]["cached_at_exit_bytes"], int(seen["reserved_at_exit"]))
        self.assertTrue(report["cached_at_exit"]["verdict_complete"])
        self.assert_no_segment_leaked(report)
        self.assertIn("cached at exit by PyTorch's caching allocator", stderr)
        # Growth: over time and per repetition of "request", at the dict line.
        if over_time:
            growth = [f for f in report["growth"]["findings"] if f["stacks"]]
            self.assertTrue(growth, report["growth"])
            self.assertTrue(any(f["module"] == "python" and (f["file"] or "").endswith("torch_dict_leak.py")
                                for f in growth[0]["stacks"][0]["stack"]), growth[0]["stacks"][0])
        requests = [g for g in report["ranges"]["growth"] if g["name"] == "request"]
        self.assertTrue(requests, [r["name"] for r in report["ranges"]["repeated"]])
        self.figures.append(f"torch dict leak: leaked {by_line[keep]['bytes']} B in {by_line[keep]['count']} tensors "
                            f"at {keep} (the script kept {seen['kept_bytes']} B); cached at exit "
                            f"{report['totals']['cached_at_exit_bytes']} B (torch reserved {seen['reserved_at_exit']})")

    def test_dict_leak_is_the_kept_bytes_at_the_keeping_line(self):
        _, report, seen, stderr = self.run_dict_leak("dict.db")
        self.check_dict_leak(report, seen, stderr)

    def test_dict_leak_ending_in_an_oom_inside_pytorchs_cache(self):
        _, report, seen, stderr = self.run_dict_leak("dict-oom.db", "--oom")
        # No cached segment counted as leaked, even with an OOM. Growth per repetition of "request" only: in a run
        # of ~150 ms the fragmenting end's 400 MiB fill the last of the 20 time windows, and whether the leak's rise
        # before it passes the threshold over time depends on where the windows fall (it failed so in three runs of
        # docs/gpu-results.md, 222c078's included, and passed in others with the same recorder); the run without
        # --oom checks growth over time.
        self.check_dict_leak(report, seen, stderr, over_time=False)
        if seen["oom"] != "raised True":
            # The sample forces the OOM with a memory-fraction cap; seen on the H200 (torch 2.11, 7a6657f) the
            # 24 MiB request was served without raising. What the trace says of the heap is then unchecked here.
            self.skipTest("the memory-fraction cap did not make PyTorch raise OutOfMemoryError")
        failed = [f for f in report["failures"] if f["allocator"] == "PyTorch's caching allocator"]
        self.assertEqual(len(failed), 1, report["failures"])
        failure = failed[0]
        self.assertEqual(failure["requested_bytes"], int(seen["oom_request"]))
        # PyTorch's own account of its cache (memory_snapshot) at the OOM, against the heap's layout in the trace.
        # Every comparison is made before any fails, so that one run shows all of them. PyTorch's tracker reports a
        # block's requested size, not the block's: the unused tail of a block handed out whole (no split of a
        # remainder of 1 MiB or less) is free space in the trace's layout, allocated in memory_snapshot (seen on
        # the H200 at a0fc486: 334434816 B free in the trace against 330295808 B in memory_snapshot).
        self.figures.append(f"torch dict leak, OOM: trace heap free {failure['heap']['free_bytes']} B, largest "
                            f"{failure['heap']['largest_free_bytes']} B; memory_snapshot free {seen['oom_cached_free']} B, "
                            f"largest {seen['oom_largest_free']} B, unused tails of allocated blocks "
                            f"{seen['oom_block_tails']} B; label {failure['label']}")
        fragmented = int(seen["oom_cached_free"]) >= int(seen["oom_request"])
        self.assertEqual(failure["label"], "heap fragmentation" if fragmented else "heap out of memory")
        self.assertEqual((failure["heap"]["free_bytes"], failure["heap"]["largest_free_bytes"]),
                         (int(seen["oom_cached_free"]) + int(seen["oom_block_tails"]), int(seen["oom_largest_free"])))
        python = [f for f in failure["stack"] if f["module"] == "python"]
        self.assertEqual(python[0]["line"], marker_line("torch_dict_leak.py", "# OOM-REQUEST"))
        self.figures.append(f"torch dict leak, OOM: {failure['label']}: {failure['heap']['free_bytes']} B free in "
                            f"PyTorch's cache, largest {failure['heap']['largest_free_bytes']} B, request "
                            f"{failure['requested_bytes']} B")


if __name__ == "__main__":
    if not have_gpu():
        print("SKIP: no NVIDIA GPU here (nvidia-smi -L failed); runs on the H200 via scripts/gpu-suite.sh")
        sys.exit(SKIP)
    if not have_torch_cuda(PYTHON):
        print("SKIP: no PyTorch with CUDA here")
        sys.exit(SKIP)
    unittest.main(verbosity=2)
