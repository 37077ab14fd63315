"""PyTorch's tensors recorded as they are allocated (python/gpumemtrace_inprocess/torch_tracker.py and the bridge it
builds), against the fake torch of fixtures_tracker/ (a labelled TEST FIXTURE: CI has no PyTorch) under the
simulated runtime: the bridge built once per torch build into its cache (once, also when several processes start
together), every block and segment in the trace with the thread and Python line that allocated it, in time order
with the CUDA-level events, an out-of-memory request at its line, and every fallback (no compiler, no headers,
another allocator backend, --no-torch-blocks) saying why and leaving the app and the CUDA level alone.
The GPU suite (tests/gpu/test_gpu_torch_blocks.py) runs the same path against the real PyTorch."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import unittest

from gmt_e2e import CLI, TraceDirTestCase, report_json, run_cli

HERE = os.path.dirname(os.path.abspath(__file__))
APP = os.path.join(HERE, "tracker_app.py")
FIXTURE = os.environ["GMT_TRACKER_FIXTURE"]
STEPS = 40
KEPT_BYTES = 2 << 20
TEMP_BYTES = 1 << 20
SEGMENT_BYTES = 256 << 20
TORCH_ALLOCATOR = 4  # schema Source::TorchAllocator
TENSOR_BLOCK = 6     # schema MemoryKind::TensorBlock
ALLOC, FREE, ALLOC_FAILED, SEGMENT_ALLOC = 1, 2, 3, 22
TORCH_BLOCK_ALLOC, TORCH_BLOCK_FREE, TORCH_SEGMENT_ALLOC = 45, 46, 47
FREE_REQUESTED, ALLOCATOR_CALL = 27, 28  # v10
TORCH_EMPTY_CACHE, TORCH_SET_SETTINGS, TORCH_SET_FRACTION = 66, 67, 68
QUARTER_BITS = 0x3FD0000000000000  # 0.25 as an IEEE-754 double


def marker(text):
    with open(APP) as f:
        for number, line in enumerate(f, 1):
            if text in line:
                return number
    raise AssertionError(text)


class TorchTrackerTest(TraceDirTestCase):
    def setUp(self):
        super().setUp()
        self.cache = self.path("bridge-cache")

    def run_app(self, name, *options, app_args=(), env=None, fixture=FIXTURE, quiet=True):
        full_env = {"PYTHONPATH": fixture, "GMT_TORCH_BRIDGE_CACHE": self.cache}
        full_env.update(env or {})
        trace = self.path(name)
        quiet_option = ["-q"] if quiet else []
        result = run_cli("run", "--simulate", *quiet_option, "-o", trace, *options, "--", sys.executable, APP,
                         str(STEPS), *app_args, env=full_env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("done True", result.stdout)
        seen = dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)
        return trace, seen, result.stderr

    def query(self, trace, sql, *args):
        db = sqlite3.connect(trace)
        try:
            return db.execute(sql, args).fetchall()
        finally:
            db.close()

    def meta(self, trace):
        return dict(self.query(trace, "SELECT key, value FROM meta"))

    def python_frames(self, trace, stack_id):
        """A stack's Python frames, innermost first, without the fake torch's own (real torch allocates in C++)."""
        frames = self.query(trace, "SELECT fl.text, fn.text, p.line FROM stack_frames f "
                                   "JOIN python_frames p ON p.id = f.python_frame_id "
                                   "JOIN strings fl ON fl.id = p.file_id JOIN strings fn ON fn.id = p.function_id "
                                   "WHERE f.stack_id = ? ORDER BY f.level", stack_id)
        return [f for f in frames if not f[0].startswith(FIXTURE)]

    def test_every_block_and_segment_is_in_the_trace_with_its_line(self):
        trace, seen, stderr = self.run_app("blocks.db")
        self.assertIn("building the PyTorch bridge", stderr)
        meta = self.meta(trace)
        self.assertEqual(meta["tensor_blocks"], "1")
        self.assertNotIn("tensor_blocks_note", meta)
        rows = self.query(trace, "SELECT id, time_ns, kind, api, memory_kind, address, size, stack_id, thread_id "
                                 "FROM events WHERE source = ? ORDER BY id", TORCH_ALLOCATOR)
        allocs = [r for r in rows if r[2] == ALLOC]
        frees = [r for r in rows if r[2] == FREE]
        segments = [r for r in rows if r[2] == SEGMENT_ALLOC]
        self.assertEqual(len(allocs), STEPS * 4)
        # The kept blocks are alive when the interpreter begins to exit: their frees during its teardown are not
        # the app's (recording of blocks stops once the atexit handlers have run).
        self.assertEqual(len(frees), STEPS * 3)
        self.assertEqual(len(rows), len(allocs) + len(frees) + len(segments))
        self.assertEqual([(r[3], r[6]) for r in segments], [(TORCH_SEGMENT_ALLOC, SEGMENT_BYTES)])
        self.assertTrue(all(r[4] == TENSOR_BLOCK for r in rows))
        self.assertEqual({r[3] for r in allocs}, {TORCH_BLOCK_ALLOC})
        self.assertEqual({r[3] for r in frees}, {TORCH_BLOCK_FREE})
        self.assertEqual(sum(r[6] for r in allocs), STEPS * (3 * TEMP_BYTES + KEPT_BYTES))
        # The segment is the CUDA-level allocation the fake torch made at init, and comes before its blocks.
        cuda = self.query(trace, "SELECT id, address, size FROM events WHERE source != ? AND kind = ?",
                          TORCH_ALLOCATOR, ALLOC)
        self.assertEqual([(c[1], c[2]) for c in cuda], [(segments[0][5], SEGMENT_BYTES)])
        self.assertLess(cuda[0][0], segments[0][0])
        self.assertLess(segments[0][0], allocs[0][0])
        # Every free gives back the block allocated last at its address; the live ones at exit are the kept ones.
        live = {}
        for r in rows:
            if r[2] == ALLOC:
                self.assertNotIn(r[5], live)
                live[r[5]] = r[6]
            elif r[2] == FREE:
                self.assertEqual(live.pop(r[5]), TEMP_BYTES)
        self.assertEqual(sorted(live.values()), [KEPT_BYTES] * STEPS)
        # As they happened: in time order with everything else, inside the loop, on the app's main thread.
        self.assertEqual(meta["events_time_ordered"], "1")
        times = [r[1] for r in allocs]
        self.assertEqual(times, sorted(times))
        self.assertGreaterEqual(min(times), int(seen["first_ns"]))
        self.assertLessEqual(max(times), int(seen["last_ns"]))
        self.assertEqual({r[8] for r in rows}, {int(meta["pid"])})
        # The Python frames of a kept block: the allocating line, then the loop that called it.
        kept_stacks = {r[7] for r in allocs if r[6] == KEPT_BYTES}
        self.assertEqual(len(kept_stacks), 1)
        frames = self.python_frames(trace, kept_stacks.pop())
        self.assertEqual(frames[0], (APP, "make_activation", marker("BLOCK-KEPT")))
        self.assertEqual(frames[1], (APP, "<module>", marker("BLOCK-LOOP")))
        temp_stacks = {r[7] for r in allocs if r[6] == TEMP_BYTES}
        self.assertEqual(len(temp_stacks), 1)
        self.assertEqual(self.python_frames(trace, temp_stacks.pop())[0], (APP, "temporary", marker("BLOCK-TEMP")))
        self.assertTrue(all(r[7] == 0 for r in frees))

    def test_threads_blocks_carry_their_own_thread_and_nothing_is_lost(self):
        threads = 16
        trace, seen, _ = self.run_app("threads.db", app_args=["--threads", str(threads)])
        ids = {int(t) for t in seen["thread_ids"].split()}
        self.assertEqual(len(ids), threads)
        rows = self.query(trace, "SELECT thread_id, kind, count(*), sum(size) FROM events WHERE source = ? "
                                 "AND size = 4096 GROUP BY thread_id, kind", TORCH_ALLOCATOR)
        allocs = {r[0]: r[2] for r in rows if r[1] == ALLOC}
        self.assertEqual(set(allocs), ids)
        self.assertEqual(set(allocs.values()), {200})
        frees = self.query(trace, "SELECT count(*) FROM events WHERE source = ? AND kind = ? AND thread_id IN (%s)"
                           % ",".join(map(str, ids)), TORCH_ALLOCATOR, FREE)
        self.assertEqual(frees[0][0], threads * 200)
        self.assertEqual(self.meta(trace)["dropped_events"], "0")

    def test_an_out_of_memory_request_is_a_failed_allocation_at_its_line(self):
        trace, seen, _ = self.run_app("oom.db", app_args=["--oom"])
        self.assertEqual(seen["oom"], "raised True")
        failed = self.query(trace, "SELECT size, stack_id, api FROM events WHERE source = ? AND kind = ?",
                            TORCH_ALLOCATOR, ALLOC_FAILED)
        self.assertEqual(len(failed), 1)
        self.assertEqual(failed[0][0], 1 << 40)
        self.assertEqual(failed[0][2], TORCH_BLOCK_ALLOC)
        self.assertEqual(self.python_frames(trace, failed[0][1])[0], (APP, "<module>", marker("BLOCK-OOM")))

    def test_the_failed_request_is_one_finding_with_its_cuda_attempts_as_evidence(self):
        # The fake allocator, as PyTorch's, asks CUDA for a new segment and tries once more before it fails the
        # request: two failed cudaMallocs inside the one request the app made.
        trace, seen, stderr = self.run_app("oom-summary.db", app_args=["--oom"], quiet=False)
        self.assertEqual(seen["oom"], "raised True")
        cuda_failures = self.query(trace, "SELECT size, thread_id FROM events WHERE source != ? AND kind = ?",
                                   TORCH_ALLOCATOR, ALLOC_FAILED)
        self.assertEqual([size for size, _ in cuda_failures], [1 << 40, 1 << 40])
        lines = stderr.splitlines()
        self.assertIn("  CUDA level: allocations 1, frees 0, failed allocations 0 (and 2 made inside the failed "
                      "request below)", lines)
        self.assertIn(f"  block level (PyTorch's caching allocator): blocks {4 * STEPS}, freed {3 * STEPS}, "
                      "failed requests 1", lines)
        findings = lines.index("  findings, largest first:")
        cached_mib = (SEGMENT_BYTES - STEPS * KEPT_BYTES) >> 20  # the temporaries' space, free in the segment
        self.assertEqual(lines[findings + 1], "    1. failed allocation of 1.00 TiB on device 0: out of memory in "
                                              f"PyTorch's caching allocator ({cached_mib}.00 MiB free in its cache)")
        self.assertEqual(lines[findings + 2], f"       at <module> {APP}:{marker('BLOCK-OOM')}")
        self.assertEqual(lines[findings + 3], "       inside it 2 CUDA-level cudaMalloc attempts failed (out of memory)")
        self.assertNotIn("failed allocation of 1.00 TiB on device 0: out of memory\n", stderr)
        report = report_json(trace)
        self.assertEqual(report["totals"]["failed_allocations"], 1)
        self.assertEqual(report["totals"]["failed_attempts_in_requests"], 2)
        [failure] = report["failures"]
        self.assertEqual(failure["api"], "torch_block_alloc")
        self.assertEqual([a["api"] for a in failure["attempts"]], ["cudaMalloc", "cudaMalloc"])
        self.assertEqual({a["thread_id"] for a in failure["attempts"]}, {failure["thread_id"]})

    def test_allocator_settings_and_calls_are_recorded_for_a_replay(self):
        # Schema v10 (gpumemtrace whatif): the settings at start, torch's version, and each call that changes the
        # allocator, before it runs, at the app's line; the app's own calls still happen.
        trace, seen, _ = self.run_app("calls.db", app_args=["--allocator-calls"],
                                      env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"})
        self.assertEqual(seen["fixture_calls"], "empty_cache,settings expandable_segments:True,fraction 0.25")
        meta = self.meta(trace)
        self.assertEqual((meta["torch_alloc_conf"], meta["torch_alloc_conf_variable"]),
                         ("max_split_size_mb:64", "PYTORCH_CUDA_ALLOC_CONF"))
        self.assertEqual((meta["torch_version"], meta["torch_git_version"]), ("2.11.0+fixture", "fixture0000000"))
        self.assertEqual(meta["torch_alloc_conf_0"], "expandable_segments:True")
        calls = self.query(trace, "SELECT api, device, size, handle, memory_kind, stack_id FROM events "
                                  "WHERE source = ? AND kind = ? ORDER BY id", TORCH_ALLOCATOR, ALLOCATOR_CALL)
        self.assertEqual([c[:5] for c in calls], [(TORCH_EMPTY_CACHE, -1, 0, 0, 0), (TORCH_SET_SETTINGS, -1, 0, 0, 0),
                                                  (TORCH_SET_FRACTION, 0, QUARTER_BITS, 0, 0)])
        # The innermost frames are the package's wrapper; then the app's line that called.
        lines = [[f for f in self.python_frames(trace, c[5]) if "gpumemtrace_inprocess" not in f[0]][0][2]
                 for c in calls]
        self.assertEqual(lines, [marker("CALL-EMPTY-CACHE"), marker("CALL-SETTINGS"), marker("CALL-FRACTION")])
        # The fake allocator completes every free at once: no free_requested of its own, one free per block.
        self.assertEqual(self.query(trace, "SELECT count(*) FROM events WHERE kind = ?", FREE_REQUESTED), [(0,)])
        # Without the variables the defaults are in force: "", and no variable named.
        trace, _, _ = self.run_app("defaults.db")
        meta = self.meta(trace)
        self.assertEqual(meta["torch_alloc_conf"], "")
        self.assertNotIn("torch_alloc_conf_variable", meta)

    def test_whatif_replays_the_blocks_and_its_self_check_rejects_another_policy(self):
        # The fake allocator is first fit in one 256 MiB segment, not PyTorch's policy: the replay under the
        # recorded settings must not reproduce it, and must name the first action that differs.
        trace, _, _ = self.run_app("replay.db")
        result = run_cli("whatif", trace, "--alloc-conf", "", "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        report = json.loads(result.stdout)
        check = report["self_check"]
        self.assertFalse(check["exact"])
        self.assertEqual(check["divergence"], f"the replay asks cudaMalloc for {2 << 20} B; the recording made "
                                              f"segment_alloc {self.first_segment(trace):#x} ({SEGMENT_BYTES} B)")
        self.assertEqual(report["recorded"]["peak_reserved_bytes"], SEGMENT_BYTES)
        self.assertEqual(report["recorded"]["requests"], 4 * STEPS)
        text = run_cli("whatif", trace)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("The self-check did not reproduce the recording", text.stdout)
        # Refused, each with its own exit code and reason.
        off, _, _ = self.run_app("off-for-whatif.db", "--no-torch-blocks")
        refused = run_cli("whatif", off)
        self.assertEqual(refused.returncode, 5, refused.stderr)
        self.assertIn("PyTorch's tensor blocks were not recorded", refused.stderr)
        async_trace, _, _ = self.run_app("async.db", env={"FIXTURE_ALLOCATOR_BACKEND": "cudaMallocAsync"})
        refused = run_cli("whatif", async_trace)
        self.assertEqual(refused.returncode, 7, refused.stderr)
        self.assertIn("cudaMallocAsync backend", refused.stderr)

    def test_blocks_of_a_private_pool_carry_it_and_whatif_stops_there(self):
        # The fixture's blocks and segments are all of memory pool {7, 0}, as a CUDA graph's capture allocates from
        # its private pool: each event keeps the pool in its handle ((7 << 32) | 0), and the replay, which models
        # the default pools only, stops at the first of them with the reason instead of a wrong divergence.
        trace, _, _ = self.run_app("pool.db", env={"FIXTURE_ALLOCATOR_POOL": "7"})
        handles = self.query(trace, "SELECT DISTINCT handle FROM events WHERE source = ? AND kind IN (?, ?)",
                             TORCH_ALLOCATOR, ALLOC, SEGMENT_ALLOC)
        self.assertEqual(handles, [(7 << 32,)])
        first = self.first_segment(trace)
        first_id = self.query(trace, "SELECT id FROM events WHERE source = ? AND kind = ? ORDER BY id LIMIT 1",
                              TORCH_ALLOCATOR, SEGMENT_ALLOC)[0][0]
        result = run_cli("whatif", trace, "--alloc-conf", "", "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        check = json.loads(result.stdout)["self_check"]
        self.assertFalse(check["exact"])
        self.assertEqual(check["divergence_event_id"], first_id, first)
        self.assertEqual(check["divergence"], f"CUDA-graph private pools are not modelled: from event {first_id}, "
                                              f"the first segment of memory pool (7, 0)")
        # Without the variable the default pools: 0.
        trace, _, _ = self.run_app("default-pool.db")
        self.assertEqual(self.query(trace, "SELECT DISTINCT handle FROM events WHERE source = ? AND kind = ?",
                                    TORCH_ALLOCATOR, ALLOC), [(0,)])

    def test_whatif_refuses_a_torch_whose_policy_was_not_checked_unless_forced(self):
        trace, seen, _ = self.run_app("old-torch.db", app_args=["--oom"], env={"FIXTURE_TORCH_VERSION": "2.9.1+old"})
        self.assertEqual(seen["oom"], "raised True")
        self.assertEqual(self.meta(trace)["torch_version"], "2.9.1+old")
        refused = run_cli("whatif", trace)
        self.assertEqual(refused.returncode, 10, refused.stderr)
        self.assertIn("was recorded with torch 2.9.1+old: the replay's allocator policy has been checked for torch "
                      "2.11 only. --force-torch-version replays it anyway", refused.stderr)
        forced = run_cli("whatif", trace, "--force-torch-version", "--format", "json")
        self.assertEqual(forced.returncode, 0, forced.stderr)
        report = json.loads(forced.stdout)
        self.assertFalse(report["torch_version_checked"])
        self.assertIsNone(report["best_setting"])
        # report's OOM finding says in one line why it names no setting, instead of replaying an unchecked policy.
        text = run_cli("report", trace)
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertIn("not replayed: this torch's allocator policy has not been checked (checked: torch 2.11; "
                      "gpumemtrace whatif --force-torch-version)", text.stdout)

    def first_segment(self, trace):
        return self.query(trace, "SELECT address FROM events WHERE source = ? AND kind = ? ORDER BY id LIMIT 1",
                          TORCH_ALLOCATOR, SEGMENT_ALLOC)[0][0]

    def test_the_bridge_is_built_once_and_then_found_in_the_cache(self):
        self.run_app("first.db")
        built = [f for f in os.listdir(self.cache) if f.endswith(".so")]
        self.assertEqual(len(built), 1, os.listdir(self.cache))
        self.assertTrue(built[0].startswith("torch-bridge-2.11.0_fixture-fixture00000-abi1-"), built[0])
        _, _, stderr = self.run_app("second.db")
        self.assertNotIn("building the PyTorch bridge", stderr)
        # Several processes at once with an empty cache (the ranks of a job): one builds, the others wait for it.
        shutil.rmtree(self.cache)
        env = dict(os.environ, PYTHONPATH=FIXTURE, GMT_TORCH_BRIDGE_CACHE=self.cache)
        processes = [subprocess.Popen([CLI, "run", "--simulate", "-q", "-o", self.path(f"rank{i}.db"), "--",
                                       sys.executable, APP, "4"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for i in range(4)]
        outputs = [p.communicate(timeout=300) for p in processes]
        self.assertEqual([p.returncode for p in processes], [0] * 4, outputs)
        self.assertEqual(sum(err.count("building the PyTorch bridge") for _, err in outputs), 1, outputs)
        for i in range(4):
            self.assertEqual(self.meta(self.path(f"rank{i}.db"))["tensor_blocks"], "1")

    def check_fallback(self, name, expected_reason, env=None, fixture=FIXTURE):
        trace, seen, stderr = self.run_app(name, env=env, fixture=fixture)
        lines = [line for line in stderr.splitlines() if "PyTorch's tensors are not tracked" in line]
        self.assertEqual(len(lines), 1, stderr)
        self.assertIn(expected_reason, lines[0])
        meta = self.meta(trace)
        self.assertEqual(meta["tensor_blocks"], "0")
        self.assertIn(expected_reason, meta["tensor_blocks_note"])
        self.assertEqual(self.query(trace, "SELECT count(*) FROM events WHERE source = ?", TORCH_ALLOCATOR), [(0,)])
        # The CUDA level is what it is without tracking: the one segment, alive at exit.
        totals = report_json(trace)["totals"]
        self.assertEqual((totals["allocations"], totals["allocated_bytes"]), (1, SEGMENT_BYTES))
        return stderr

    def test_without_a_compiler_the_app_runs_on_at_the_cuda_level(self):
        self.check_fallback("nocxx.db", "no C++ compiler", env={"CXX": "/nonexistent/c++"})

    def test_another_allocator_backend_is_said(self):
        self.check_fallback("backend.db", "allocator backend is cudaMallocAsync",
                            env={"FIXTURE_ALLOCATOR_BACKEND": "cudaMallocAsync"})

    def test_a_torch_without_headers_is_said(self):
        headless = self.path("headless")
        shutil.copytree(FIXTURE, headless)
        shutil.rmtree(os.path.join(headless, "torch", "include"))
        self.check_fallback("headless.db", "has no C++ headers", fixture=headless)

    def test_a_bridge_that_does_not_build_is_said_with_its_log(self):
        stderr = self.check_fallback("broken.db", "building the PyTorch bridge failed",
                                     env={"CXX": "c++ -DGMT_FIXTURE_BREAK -include /nonexistent/header.h"})
        log = [f for f in os.listdir(self.cache) if f.endswith(".log")]
        self.assertEqual(len(log), 1)
        self.assertIn(log[0], stderr)

    def test_no_torch_blocks_leaves_pytorch_alone(self):
        trace, _, stderr = self.run_app("off.db", "--no-torch-blocks")
        self.assertNotIn("bridge", stderr)
        self.assertNotIn("tensor_blocks", self.meta(trace))
        self.assertEqual(self.query(trace, "SELECT count(*) FROM events WHERE source = ?", TORCH_ALLOCATOR), [(0,)])
        self.assertFalse(os.path.exists(self.cache))

    def test_report_names_the_kept_tensors_line(self):
        trace, _, _ = self.run_app("report.db")
        report = report_json(trace)
        blocks = report["tensor_blocks"]
        self.assertEqual(blocks["totals"]["allocations"], STEPS * 4)
        self.assertEqual(blocks["totals"]["leaked_bytes"], STEPS * KEPT_BYTES)
        self.assertEqual(blocks["totals"]["leaked_allocations"], STEPS)
        kept_line = f"{APP}:make_activation:{marker('BLOCK-KEPT')}"
        self.assertEqual(blocks["alive_at_exit"][0]["python_line"], kept_line)
        self.assertEqual(blocks["alive_at_exit"][0]["bytes"], STEPS * KEPT_BYTES)

    def test_python_only_block_stacks_keep_the_lines_and_drop_the_native_frames(self):
        # GMT_BLOCK_STACKS=python (an experiment on the capture's cost, issue 33): a block allocated by a thread
        # running Python takes its Python frames only, no native walk. The same leak at the same line, the same
        # Python frames; no native frame in a block's stack; the CUDA level keeps its native stacks.
        full, _, _ = self.run_app("full.db")
        python_only, _, _ = self.run_app("python-only.db", env={"GMT_BLOCK_STACKS": "python"})
        kept_line = f"{APP}:make_activation:{marker('BLOCK-KEPT')}"
        for trace in (full, python_only):
            leak = report_json(trace)["leaks"][0]
            self.assertEqual((leak["bytes"], leak["count"], leak["python_line"]),
                             (STEPS * KEPT_BYTES, STEPS, kept_line), trace)
        native_frames = ("SELECT count(*) FROM stack_frames f WHERE COALESCE(f.python_frame_id, 0) = 0 "
                         "AND f.stack_id IN (SELECT stack_id FROM events WHERE source = ? AND kind = ?)")
        self.assertGreater(self.query(full, native_frames, TORCH_ALLOCATOR, ALLOC)[0][0], 0)
        self.assertEqual(self.query(python_only, native_frames, TORCH_ALLOCATOR, ALLOC)[0][0], 0)
        cuda_native = self.query(python_only, "SELECT count(*) FROM stack_frames f "
                                              "WHERE COALESCE(f.python_frame_id, 0) = 0 AND f.stack_id IN "
                                              "(SELECT stack_id FROM events WHERE source != ? AND kind = ?)",
                                 TORCH_ALLOCATOR, ALLOC)[0][0]
        self.assertGreater(cuda_native, 0)
        kept_stacks = "SELECT DISTINCT stack_id FROM events WHERE source = ? AND kind = ? AND size = ?"
        stacks = {trace: self.query(trace, kept_stacks, TORCH_ALLOCATOR, ALLOC, KEPT_BYTES)
                  for trace in (full, python_only)}
        self.assertEqual(len(stacks[python_only]), 1)  # the memo answered the 39 after the first from one entry
        self.assertEqual(self.python_frames(python_only, stacks[python_only][0][0]),
                         self.python_frames(full, stacks[full][0][0]))

    def test_sampled_block_stacks_name_every_large_block_and_count_every_small_one(self):
        # run --sample-block-stacks 64KiB (issue 33, option c): the 1 MiB and 2 MiB blocks all take their stack, the
        # 4 KiB ones (800 made and freed by four threads, 400 kept to the end) one per 64 KiB on average: a block of
        # 4 KiB with probability 1 - exp(-1/16), ~73 of 1200 (standard deviation ~8.2). Every block is recorded.
        small_kept = 400
        trace, _, _ = self.run_app("sampled.db", "--sample-block-stacks", "64KiB",
                                   app_args=("--threads", "4", "--small-kept", str(small_kept)))
        self.assertEqual(self.meta(trace)["block_stack_sample_bytes"], "65536")
        by_size = dict(((size, has_stack), count) for size, has_stack, count in self.query(
            trace, "SELECT size, stack_id != 0, count(*) FROM events WHERE source = ? AND kind = ? GROUP BY 1, 2",
            TORCH_ALLOCATOR, ALLOC))
        self.assertEqual({(size, has) for size, has in by_size if size >= 65536},
                         {(TEMP_BYTES, 1), (KEPT_BYTES, 1)})  # no large block without its stack
        self.assertEqual((by_size[(TEMP_BYTES, 1)], by_size[(KEPT_BYTES, 1)]), (3 * STEPS, STEPS))
        small_sampled = by_size.get((4096, 1), 0)
        self.assertEqual(small_sampled + by_size.get((4096, 0), 0), 800 + small_kept)
        self.assertTrue(30 <= small_sampled <= 130, small_sampled)
        # A sampled small block's stack is its own line's, whichever thread took it.
        lines = {(function, line) for stack_id, in self.query(
                     trace, "SELECT DISTINCT stack_id FROM events WHERE source = ? AND kind = ? AND size = 4096 "
                            "AND stack_id != 0", TORCH_ALLOCATOR, ALLOC)
                 for _, function, line in self.python_frames(trace, stack_id)[:1]}
        self.assertEqual(lines, {("churn", marker("BLOCK-THREAD")), ("small", marker("BLOCK-SMALL"))})
        # The report: leaks exact in bytes; the kept small blocks split between their line and "not sampled".
        report = report_json(trace)
        self.assertEqual(report["trace"]["block_stack_sample_bytes"], 65536)
        totals = report["totals"]
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]),
                         (STEPS * KEPT_BYTES + small_kept * 4096, STEPS + small_kept))
        small_line = f"{APP}:small:{marker('BLOCK-SMALL')}"
        groups = {leak["python_line"]: (leak["bytes"], leak["count"], leak["stack_id"]) for leak in report["leaks"]}
        self.assertEqual(set(groups), {f"{APP}:make_activation:{marker('BLOCK-KEPT')}", small_line, None})
        self.assertEqual(groups[None][2], 0)
        self.assertEqual(groups[small_line][1] + groups[None][1], small_kept)
        self.assertEqual(groups[small_line][0] + groups[None][0], small_kept * 4096)
        self.assertGreater(groups[small_line][1], 0)
        text = run_cli("report", trace).stdout
        self.assertIn("sampled for tensor blocks (--sample-block-stacks 64.00 KiB)", text)
        self.assertIn(f"{groups[None][1]} allocations still held at exit\n       (stack not sampled: blocks under "
                      "64.00 KiB take theirs one per 64.00 KiB allocated", text)
        # Without the option every block has its stack, and the trace says nothing of a sample.
        full, _, _ = self.run_app("full.db", app_args=("--threads", "4", "--small-kept", str(small_kept)))
        self.assertNotIn("block_stack_sample_bytes", self.meta(full))
        self.assertEqual(self.query(full, "SELECT count(*) FROM events WHERE source = ? AND kind = ? AND stack_id = 0",
                                    TORCH_ALLOCATOR, ALLOC)[0][0], 0)
        self.assertEqual(report_json(full)["trace"]["block_stack_sample_bytes"], 0)
        refused = run_cli("run", "--simulate", "--no-stacks", "--sample-block-stacks", "1MiB", "--", sys.executable,
                          "-c", "pass")
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("--no-stacks excludes --sample-block-stacks", refused.stderr)

    def test_leaked_is_the_kept_tensors_and_the_segment_is_cached(self):
        trace, _, stderr = self.run_app("leak.db", quiet=False)  # run's end summary too
        report = report_json(trace)
        totals = report["totals"]
        # What the app held at exit: the kept blocks, at the line that kept them; nothing else.
        self.assertEqual((totals["leaked_bytes"], totals["leaked_allocations"]), (STEPS * KEPT_BYTES, STEPS))
        # The header counts every event, the tensors' too (the CUDA level alone has a handful here).
        self.assertEqual(report["trace"]["event_count"], self.query(trace, "SELECT count(*) FROM events")[0][0])
        self.assertEqual(report["leak_groups"]["total"], 1)
        leak = report["leaks"][0]
        self.assertEqual((leak["bytes"], leak["count"]), (STEPS * KEPT_BYTES, STEPS))
        self.assertEqual(leak["python_line"], f"{APP}:make_activation:{marker('BLOCK-KEPT')}")
        self.assertEqual(leak["memory_kinds"], ["tensor_block"])
        # PyTorch's segment (the one CUDA-level allocation, still the device's figures) is cached, not leaked.
        self.assertEqual((totals["allocations"], totals["allocated_bytes"]), (1, SEGMENT_BYTES))
        self.assertEqual((totals["cached_at_exit_bytes"], totals["cached_at_exit_allocations"]), (SEGMENT_BYTES, 1))
        cached = report["cached_at_exit"]
        self.assertTrue(cached["verdict_complete"])
        self.assertEqual([(h["allocator"], h["reserved_bytes"], h["segments"], h["held_bytes"], h["cached"])
                          for h in cached["heaps"]],
                         [("PyTorch's caching allocator", SEGMENT_BYTES, 1, STEPS * KEPT_BYTES, True)])
        # run's end summary says the same.
        # Each count at its level: the segment's cudaMalloc at the CUDA level, the tensors' blocks at the block level.
        self.assertIn("  CUDA level: allocations 1, frees 0, failed allocations 0\n", stderr)
        self.assertIn(f"  block level (PyTorch's caching allocator): blocks {4 * STEPS}, freed {3 * STEPS}, "
                      "failed requests 0\n", stderr)
        self.assertIn(f"leaked {STEPS * KEPT_BYTES // (1 << 20)}.00 MiB ({STEPS * KEPT_BYTES} B) in {STEPS} "
                      "blocks from 1 call stack", stderr)
        self.assertIn(f"cached at exit by PyTorch's caching allocator: 256.00 MiB ({SEGMENT_BYTES} B) (not a leak)",
                      stderr)
        # --fail-on-leak: exactly the kept bytes leaked, the segment counts for nothing.
        at_limit = run_cli("report", f"--fail-on-leak={STEPS * KEPT_BYTES}", trace)
        self.assertEqual(at_limit.returncode, 0, at_limit.stderr)
        over = run_cli("report", f"--fail-on-leak={STEPS * KEPT_BYTES - 1}", trace)
        self.assertEqual(over.returncode, 1, over.stderr)
        self.assertIn(f"({STEPS * KEPT_BYTES} B) leaked in {STEPS} allocations from 1 call stack", over.stderr)

    def test_without_blocks_pytorchs_reservation_is_said_and_no_clean_verdict(self):
        trace, _, stderr = self.run_app("unrecorded.db", env={"CXX": "/nonexistent/c++"}, quiet=False)
        report = report_json(trace)
        heaps = report["cached_at_exit"]["heaps"]
        self.assertEqual(len(heaps), 1)
        self.assertFalse(heaps[0]["blocks_recorded"])
        self.assertTrue(heaps[0]["in_leaks"])
        self.assertIn("no C++ compiler", heaps[0]["note"])
        self.assertEqual(report["totals"]["cached_at_exit_bytes"], 0)
        self.assertIn("reserved at exit by PyTorch's caching allocator", stderr)
        self.assertNotIn("no leaks", stderr)


if __name__ == "__main__":
    unittest.main()
