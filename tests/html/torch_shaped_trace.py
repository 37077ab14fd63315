"""A trace shaped like a PyTorch program's, for the exports that need blocks inside segments without a GPU: a real
trace of samples/no_leaks under the simulated runtime (the real schema and meta), its events replaced by events
written here in the recorder's shapes (docs/trace-format.md, "PyTorch's tensor blocks"). A test fixture, labelled as
such: nothing in it was recorded from PyTorch.

What it holds (times in ms from the process start; MiB sizes):
  device 0  cudaMalloc A 20 (PyTorch's segment behind it: backing memory), segment A 20 (large),
            blocks A+0 3 (kept), A+3 3 (freed at 6: a hole), A+6 1 (kept),
            a small segment C 2 with a block of 0.5 that comes and goes, then the segment and its cudaMalloc freed,
            cudaMalloc B 8 (a library's buffer beside PyTorch's cache, kept),
            block F 1 outside every recorded segment (kept);
  device 1  cudaMalloc D 4 (kept), E 1 (freed).
make_replayable_torch_trace writes another trace, one that the what-if replay of PyTorch's allocator reproduces.
"""
import sqlite3

from gmt_e2e import run_cli, sample

MIB = 1 << 20
A, B, C, D, E, F = (0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000, 0x7F3100000000, 0x7F4000000000)

# schema/trace_schema.h
ALLOC, FREE, SEGMENT_ALLOC, SEGMENT_FREE = 1, 2, 22, 23
DEVICE, TENSOR_BLOCK = 1, 6
RUNTIME_HOOK, TORCH = 1, 4
CUDA_MALLOC, CUDA_FREE = 1, 9
BLOCK_ALLOC, BLOCK_FREE, SEGMENT_ALLOC_API, SEGMENT_FREE_API, SEGMENT_MAP_API = 45, 46, 47, 48, 49
X = 0x7F5000000000  # add_expandable_segment's range

# What the app holds at the end, per device (blocks, and CUDA memory behind no segment).
LIVE_AT_END = {0: 3 * MIB + 1 * MIB + 8 * MIB + 1 * MIB, 1: 4 * MIB}
# The segments live at the end: (device, address) -> (total, bytes of live blocks, type).
SEGMENTS_AT_END = {
    (0, A): (20 * MIB, 4 * MIB, "large"),
    (0, B): (8 * MIB, 8 * MIB, "cuda"),
    (0, F): (1 * MIB, 1 * MIB, "unrecorded"),
    (1, D): (4 * MIB, 4 * MIB, "cuda"),
}
# Function names of the stacks written here, one per call site (symbols rows: the report shows them).
SITES = ("alloc_weights", "nccl_buffer", "forward_activations", "small_temp", "device1_buffers")


def make_torch_shaped_trace(path, hostile_name=None):
    """Writes the trace at `path`. `hostile_name`, when given, names the forward_activations site instead."""
    result = run_cli("run", "-q", "--simulate", "-o", path, "--", sample("no_leaks"))
    assert result.returncode == 0, result.stderr
    db = sqlite3.connect(path)
    with db:
        start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
        db.execute("DELETE FROM events")
        db.execute("DELETE FROM alloc_failures")
        stacks = {}
        module = db.execute("SELECT id FROM modules ORDER BY id LIMIT 1").fetchone()
        for i, name in enumerate(SITES):
            if hostile_name and name == "forward_activations":
                name = hostile_name
            stack = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM stacks").fetchone()[0]
            pc = 0x7E0000001000 + 0x100 * i
            db.execute("INSERT INTO stacks(id, depth) VALUES (?, 1)", (stack,))
            db.execute("INSERT INTO stack_frames(stack_id, level, pc) VALUES (?, 0, ?)", (stack, pc))
            db.execute("INSERT OR REPLACE INTO symbols(pc, module_id, function, file, line) VALUES (?, ?, ?, ?, ?)",
                       (pc, module[0] if module else None, name, "train.py", 10 + i))
            stacks[SITES[i]] = stack

        def event(ms, kind, api, source, memory_kind, device, address, size, stack=None):
            db.execute("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, "
                       "size, stack_id, error) VALUES (?, ?, ?, ?, ?, 1000, ?, 0, ?, ?, ?, 0)",
                       (start + int(ms * 1e6), kind, api, source, memory_kind, device, address, size,
                        stacks[stack] if stack else 0))

        cuda = (RUNTIME_HOOK, DEVICE)
        torch = (TORCH, TENSOR_BLOCK)
        event(1, ALLOC, CUDA_MALLOC, *cuda, 0, A, 20 * MIB, "alloc_weights")
        event(1.01, SEGMENT_ALLOC, SEGMENT_ALLOC_API, *torch, 0, A, 20 * MIB)
        event(2, ALLOC, BLOCK_ALLOC, *torch, 0, A, 3 * MIB, "alloc_weights")
        event(3, ALLOC, BLOCK_ALLOC, *torch, 0, A + 3 * MIB, 3 * MIB, "forward_activations")
        event(4, ALLOC, BLOCK_ALLOC, *torch, 0, A + 6 * MIB, 1 * MIB, "forward_activations")
        event(5, ALLOC, CUDA_MALLOC, *cuda, 0, B, 8 * MIB, "nccl_buffer")
        event(6, FREE, BLOCK_FREE, *torch, 0, A + 3 * MIB, 0)
        event(7, ALLOC, CUDA_MALLOC, *cuda, 0, C, 2 * MIB, "small_temp")
        event(7.01, SEGMENT_ALLOC, SEGMENT_ALLOC_API, *torch, 0, C, 2 * MIB)
        event(8, ALLOC, BLOCK_ALLOC, *torch, 0, C, MIB // 2, "small_temp")
        event(9, FREE, BLOCK_FREE, *torch, 0, C, 0)
        event(10, SEGMENT_FREE, SEGMENT_FREE_API, *torch, 0, C, 2 * MIB)
        event(10.01, FREE, CUDA_FREE, *cuda, 0, C, 0)
        event(11, ALLOC, BLOCK_ALLOC, *torch, 0, F, 1 * MIB, "forward_activations")
        event(12, ALLOC, CUDA_MALLOC, *cuda, 1, D, 4 * MIB, "device1_buffers")
        event(13, ALLOC, CUDA_MALLOC, *cuda, 1, E, 1 * MIB, "device1_buffers")
        event(14, FREE, CUDA_FREE, *cuda, 1, E, 0)
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('tensor_blocks', '1')")
        # The run ends after the last event above, however quickly the simulated program ran (a run of under 14 ms
        # put the trace's end before device 1's events, seen once in CI).
        db.execute("UPDATE meta SET value = MAX(CAST(value AS INTEGER), ?) WHERE key = 'end_monotonic_ns'",
                   (start + 15_000_000,))
    db.close()
    return stacks


def add_expandable_segment(path):
    """Adds, on device 2 at 20-22 ms, an expandable segment grown in place (PyTorch's segment_map of two 2 MiB parts
    at X and X + 2 MiB) and a 2 MiB block at X + 1 MiB that spans both parts, kept."""
    db = sqlite3.connect(path)
    with db:
        start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
        stack = db.execute("SELECT MIN(stack_id) FROM events WHERE stack_id != 0").fetchone()[0]
        for ms, kind, api, address, size in ((20, SEGMENT_ALLOC, SEGMENT_MAP_API, X, 2 * MIB),
                                             (21, SEGMENT_ALLOC, SEGMENT_MAP_API, X + 2 * MIB, 2 * MIB),
                                             (22, ALLOC, BLOCK_ALLOC, X + MIB, 2 * MIB)):
            db.execute("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, "
                       "address, size, stack_id, error) VALUES (?, ?, ?, ?, ?, 1000, 2, 0, ?, ?, ?, 0)",
                       (start + ms * 1_000_000, kind, api, TORCH, TENSOR_BLOCK, address, size,
                        stack if kind == ALLOC else 0))
        db.execute("UPDATE meta SET value = MAX(CAST(value AS INTEGER), ?) WHERE key = 'end_monotonic_ns'",
                   (start + 23_000_000,))  # after these events, as above
    db.close()


# make_replayable_torch_trace's layout: what PyTorch's default caching allocator does with its requests, worked out
# from CUDACachingAllocator.cpp (analysis/replay/ replays it; tests/unit/snapshot_block_sizes_test.cpp has the rules).
R_LARGE, R_SMALL = 0x7F6000000000, 0x7F6004000000
# (offset in its segment, the block's real size, requested, state)
REPLAYED_LARGE = [(0, 3 * MIB, 3 * MIB, "active_allocated"),
                  (3 * MIB, 17 * MIB, 16 * MIB + 100, "active_allocated")]  # handed out whole: its 1 MiB - 512 B tail
REPLAYED_SMALL = [(0, 1024, 1000, "active_allocated"), (1024, 1024, 700, "active_allocated"),
                  (2048, 4096, 4000, "active_pending_free"), (6144, 2 * MIB - 6144, 0, "inactive")]
FREE_REQUESTED, FREE_REQUESTED_API = 27, 65


def make_replayable_torch_trace(path, older=False):
    """A trace of schema 10 or later whose PyTorch actions the what-if replay reproduces (device 0): a 20 MiB segment
    with a 3 MiB block and a 16 MiB + 100 B one handed out whole, a 2 MiB small-pool segment with blocks of 1000 B and
    700 B and one of 4000 B freed but pending its streams. `older=True` marks it schema 9, from before PyTorch's
    allocator settings were recorded, and leaves them out."""
    result = run_cli("run", "-q", "--simulate", "-o", path, "--", sample("no_leaks"))
    assert result.returncode == 0, result.stderr
    db = sqlite3.connect(path)
    with db:
        start = int(db.execute("SELECT value FROM meta WHERE key = 'start_monotonic_ns'").fetchone()[0])
        db.execute("DELETE FROM events")
        db.execute("DELETE FROM alloc_failures")
        for ms, kind, api, address, size in (
                (1, SEGMENT_ALLOC, SEGMENT_ALLOC_API, R_LARGE, 20 * MIB),
                (2, ALLOC, BLOCK_ALLOC, R_LARGE, 3 * MIB),
                (3, ALLOC, BLOCK_ALLOC, R_LARGE + 3 * MIB, 16 * MIB + 100),
                (4, SEGMENT_ALLOC, SEGMENT_ALLOC_API, R_SMALL, 2 * MIB),
                (5, ALLOC, BLOCK_ALLOC, R_SMALL, 1000),
                (6, ALLOC, BLOCK_ALLOC, R_SMALL + 1024, 700),
                (7, ALLOC, BLOCK_ALLOC, R_SMALL + 2048, 4000),
                (8, FREE_REQUESTED, FREE_REQUESTED_API, R_SMALL + 2048, 4000)):
            db.execute("INSERT INTO events(time_ns, kind, api, source, memory_kind, thread_id, device, stream, address, "
                       "size, stack_id, error) VALUES (?, ?, ?, ?, ?, 1000, 0, 0, ?, ?, 0, 0)",
                       (start + ms * 1_000_000, kind, api, TORCH, TENSOR_BLOCK, address, size))
        db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('tensor_blocks', '1')")
        db.execute("DELETE FROM meta WHERE key = 'torch_alloc_conf'")
        if older:
            db.execute("PRAGMA user_version = 9")
        else:
            db.execute("INSERT INTO meta(key, value) VALUES ('torch_alloc_conf', '')")
    db.close()
