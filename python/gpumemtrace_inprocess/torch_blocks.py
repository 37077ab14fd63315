"""The block-level mode for PyTorch (`gpumemtrace run --torch-blocks`, GMT_TORCH_BLOCKS=1).

At the CUDA level PyTorch shows only its segments: a leak inside the caching allocator grows whatever allocation
happened to need a new segment. This mode records the tensor blocks themselves, each with the Python stack that
allocated it, so that the report names the Python line whose tensors are kept.

How: PyTorch's own recorder, torch.cuda.memory._record_memory_history(enabled='all', context='alloc',
stacks='python', max_entries=N), keeps a ring of the allocator's actions per device. It is switched on at CUDA's
lazy initialization (torch.cuda._lazy_call): importing torch never initializes CUDA because of us, and a process
that never uses CUDA is left alone. The ring is drained into the trace (torch.cuda.memory._snapshot(), the new
entries only) by a daemon thread, on PyTorch's out-of-memory observer, and at interpreter exit (an atexit handler
registered after torch's own, so it runs before torch tears down). The daemon thread must import nothing:
whatever a snapshot imports is imported on the app's thread when the mode starts (_import_what_snapshots_import).

What is recorded: each 'alloc' entry as an allocation and each 'free_completed' as its free (memory kind
tensor_block, source torch_allocator). free_completed, not free_requested: a block freed while other streams
still use it (record_stream) returns to the allocator only when they are done, and only then can its address be
handed out again, so live blocks never overlap. Times are PyTorch's (Unix-epoch microseconds) moved onto the
trace's CLOCK_MONOTONIC by one offset taken when the mode starts.

Drain: snapshots hold the whole ring; the entries not drained yet are those after the last ones drained before
(matched by (action, address, size, time_us) of the last few). The daemon drains often enough that at most about
a quarter of the ring fills between drains (the period adapts to the allocation rate, from 50 ms, and
to the drain's own cost: each snapshot converts the whole ring, so a quiet app is drained at most every second or
every 20 drain durations, whichever is longer). If the app
outruns it anyway, the ring overwrites entries before they are drained: those blocks are lost (how many is
unknown), the drain counts it in the trace's meta tensor_blocks_overruns, and says it once on stderr.
"""
import atexit
import ctypes
import os
import sys
import threading
import time

from . import environment, native

ENV_ENABLED = environment.TORCH_BLOCKS
ENV_MAX_ENTRIES = environment.TORCH_BLOCKS_ENTRIES  # PyTorch's ring size per device
DEFAULT_MAX_ENTRIES = 50000
MIN_PERIOD_S = 0.05
MAX_PERIOD_S = 1.0  # the longest wait unless a drain costs more than 1/COST_FACTOR of it
COST_FACTOR = 20
_TAIL = 4  # entries matched to find where the last drain ended
_MAX_FRAMES = 64  # as the native stacks
DRAIN_THREAD_NAME = "gpumemtrace-torch-blocks"
_RECORDED_ACTIONS = {"alloc": 0, "free_completed": 1}
# What the drain never reads (segments are the CUDA level's): left out of PyTorch's ring where it allows that.
_SKIPPED_ACTIONS = ["free_requested", "segment_alloc", "segment_free", "segment_map", "segment_unmap", "snapshot"]


class _Block(ctypes.Structure):  # recorder/tensor_blocks.h: gmt_tensor_block
    _fields_ = [("time_ns", ctypes.c_uint64), ("address", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("stream", ctypes.c_uint64), ("device", ctypes.c_int32), ("is_free", ctypes.c_int32),
                ("first_frame", ctypes.c_uint32), ("frame_count", ctypes.c_uint32)]


class _Frame(ctypes.Structure):  # gmt_tensor_block_frame
    _fields_ = [("file", ctypes.c_uint32), ("function", ctypes.c_uint32), ("line", ctypes.c_int32)]


def _say(message):
    sys.stderr.write(f"gpumemtrace: {message}\n")


def _key(entry):
    return (entry.get("action"), entry.get("addr"), entry.get("size"), entry.get("time_us"))


def enabled():
    return os.environ.get(ENV_ENABLED, "0") == "1"


def max_entries():
    try:
        value = int(os.environ.get(ENV_MAX_ENTRIES, DEFAULT_MAX_ENTRIES))
    except ValueError:
        value = DEFAULT_MAX_ENTRIES
    return max(value, 16)


class Drain:
    """Moves the entries of PyTorch's history ring that were not drained yet into the trace."""

    def __init__(self, snapshot, record, ring_entries):
        self._snapshot = snapshot  # () -> torch.cuda.memory._snapshot()
        self._record = record      # the native gmt_record_tensor_blocks
        self._ring_entries = ring_entries
        self._lock = threading.Lock()
        self._tails = {}  # device -> keys of the last entries drained
        # Unix-epoch ns minus CLOCK_MONOTONIC ns (CPython's time.monotonic is CLOCK_MONOTONIC on Linux).
        self._offset_ns = time.time_ns() - time.monotonic_ns()
        self._thread_id = threading.main_thread().native_id
        self._pid = os.getpid()  # a forked child inherits the ring's copy, not ours to record (its own trace)
        self.overruns = 0
        self.drains = 0
        self.blocks = 0
        self.last_new_entries = 0
        self.last_drain_s = 0.0
        self._warned = False

    def mark_started(self):
        self._record(None, 0, None, 0, None, 0, self._thread_id, 0)

    def drain(self, timeout=-1):
        """Drains now; returns the blocks recorded (None when another drain held the lock past `timeout`)."""
        if os.getpid() != self._pid:
            return None
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            return self._drain_locked()
        finally:
            self._lock.release()

    def _drain_locked(self):
        started = time.monotonic()
        try:
            return self._drain_snapshot(self._snapshot().get("device_traces") or [])
        finally:
            self.last_drain_s = time.monotonic() - started

    def _drain_snapshot(self, traces):
        new = []
        new_entries = 0
        for device, entries in enumerate(traces):
            first = self._first_new(device, entries)
            new_entries += len(entries) - first
            for index in range(first, len(entries)):
                entry = entries[index]
                if entry.get("action") in _RECORDED_ACTIONS:
                    new.append((entry.get("time_us", 0), device, index, entry))
            if entries:
                self._tails[device] = [_key(e) for e in entries[-_TAIL:]]
        new.sort(key=lambda item: (item[0], item[1], item[2]))  # devices merged in time order
        self.drains += 1
        self.last_new_entries = new_entries
        if new or self.drains == 1:
            self._send(new)
        return len(new)

    def _first_new(self, device, entries):
        tail = self._tails.get(device)
        if not tail:
            return 0
        n = len(tail)
        for end in range(len(entries), 0, -1):  # newest first: the match is usually near the end
            if _key(entries[end - 1]) != tail[-1]:
                continue
            # At the ring's start the older part of the tail may be overwritten already: match what is left.
            start = max(0, end - n)
            if [_key(e) for e in entries[start:end]] == tail[n - (end - start):]:
                return end
        # The ring overwrote the last entries we drained: everything in between is lost.
        self.overruns += 1
        if not self._warned:
            self._warned = True
            _say(f"PyTorch's memory history ring ({self._ring_entries} entries) overran between two drains: "
                 f"some tensor blocks are missing from the trace (counted in meta tensor_blocks_overruns; a larger "
                 f"{ENV_MAX_ENTRIES} helps)")
        return 0

    def _send(self, new):
        strings = {}
        frames = []
        stacks = {}  # tuple of frames -> (first, count): blocks allocated from one place share their frames
        blocks = (_Block * len(new))()
        for i, (time_us, device, _, entry) in enumerate(new):
            block = blocks[i]
            block.time_ns = max(0, int(time_us) * 1000 - self._offset_ns)
            block.address = int(entry.get("addr") or 0) & 0xFFFFFFFFFFFFFFFF
            block.size = int(entry.get("size") or 0)
            block.stream = int(entry.get("stream") or 0) & 0xFFFFFFFFFFFFFFFF
            block.device = device
            block.is_free = _RECORDED_ACTIONS[entry["action"]]
            raw = () if block.is_free else (entry.get("frames") or ())
            key = tuple((f.get("filename", ""), f.get("name", ""), int(f.get("line") or 0)) for f in raw[:_MAX_FRAMES])
            place = stacks.get(key)
            if place is None:
                place = (len(frames), len(key))
                for filename, name, line in key:
                    frames.append((strings.setdefault(filename, len(strings)),
                                   strings.setdefault(name, len(strings)), line))
                stacks[key] = place
            block.first_frame, block.frame_count = place
        frame_array = (_Frame * len(frames))(*frames)
        texts = [s.encode("utf-8", "surrogateescape") for s in strings]
        string_array = (ctypes.c_char_p * len(texts))(*texts)
        recorded = self._record(blocks, len(new), frame_array, len(frames), string_array, len(texts),
                                self._thread_id, self.overruns)
        if recorded >= 0:
            self.blocks += recorded

    def period_after(self, elapsed_s):
        """How long to wait before the next drain. A drain converts the whole ring (its cost grows with the ring's
        fill, not with the new entries), so: often enough that about a quarter of the ring fills in between (no
        entry lost), and otherwise rarely enough that draining takes at most ~5% of the time."""
        at_most_for_cost = max(MAX_PERIOD_S, COST_FACTOR * self.last_drain_s)
        if self.last_new_entries <= 0 or elapsed_s <= 0:
            return at_most_for_cost
        rate = self.last_new_entries / elapsed_s
        return max(MIN_PERIOD_S, min(self._ring_entries / 4 / rate, at_most_for_cost))


_drain = None


def drain_now():
    """Drains PyTorch's history into the trace now (also used by tests); the blocks recorded, or None."""
    return _drain.drain() if _drain is not None else None


def _native_recorder():
    return native.function(
        "gmt_record_tensor_blocks", ctypes.c_int,
        [ctypes.POINTER(_Block), ctypes.c_size_t, ctypes.POINTER(_Frame), ctypes.c_size_t,
         ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, ctypes.c_uint32, ctypes.c_uint64])


def _drain_periodically(drain, stop):
    last = time.monotonic()
    # The allocation rate is not known yet: drain soon. Waiting the longest period first overran the default
    # ring within the first second of a training loop on the H200 (~600 blocks per 17 ms step).
    period = MIN_PERIOD_S
    while not stop.wait(period):
        try:
            drain.drain()
        except Exception as error:  # never into the app; the exit drain still runs
            _say(f"draining PyTorch's memory history failed: {error!r}; the periodic drain is off")
            return
        now = time.monotonic()
        period = drain.period_after(now - last)
        last = now


def _import_what_snapshots_import(torch):
    """Imports, on the app's thread, what PyTorch's snapshot would otherwise import on our drain thread.

    A snapshot symbolizes the Python frames of its entries, and PyTorch's symbolizer asks `hasattr(torch,
    "_inductor")` to map compiled code back to source lines. torch._inductor is one of torch's lazy submodules:
    asking for the attribute imports it. Imported from the drain thread while the app imports torch._dynamo (as
    torch.optim does at its first use), the two imports meet in torch's circular imports and the app's fails
    (`cannot import name 'IndentedBuffer' from 'torch._inductor.utils'`, seen on the H200). So the package is
    imported here, at CUDA's initialization on the app's thread, as the app's own first snapshot would. Returns
    whether draining from another thread is safe; when the import fails, the drains stay on the app's thread
    (PyTorch's out-of-memory observer, interpreter exit) and the ring may overrun in between.
    """
    try:
        getattr(torch, "_inductor")
        return True
    except AttributeError:  # a PyTorch without the lazy submodule: its symbolizer's hasattr imports nothing either
        return True
    except Exception as error:
        _say(f"--torch-blocks: importing torch._inductor (PyTorch's snapshots need it) failed ({error!r}); tensor "
             f"blocks are drained only at out-of-memory and at exit")
        return False


def _start_recording(torch, record):
    """At CUDA's lazy initialization: switch PyTorch's history on and start draining it."""
    global _drain
    ring = max_entries()
    record_history = torch.cuda.memory._record_memory_history
    try:
        # Newer PyTorch can leave actions out of the ring: fewer entries per tensor, so cheaper drains.
        record_history(enabled="all", context="alloc", stacks="python", max_entries=ring, skip_actions=_SKIPPED_ACTIONS)
    except Exception:  # a PyTorch without skip_actions (or without one of these actions): the whole ring
        record_history(enabled="all", context="alloc", stacks="python", max_entries=ring)
    drain = Drain(torch.cuda.memory._snapshot, record, ring)
    drain.mark_started()
    drain.drain()
    # Before any drain off the app's thread: PyTorch's snapshot may import torch._inductor (below).
    periodic = _import_what_snapshots_import(torch)
    _drain = drain
    stop = threading.Event()

    def at_exit():
        stop.set()
        try:
            drain.drain(timeout=10)
        except Exception as error:
            _say(f"the last drain of PyTorch's memory history failed: {error!r}")

    atexit.register(at_exit)  # registered after torch's own handlers: runs before them

    def on_out_of_memory(device, alloc, device_allocated, device_free):
        try:
            drain.drain(timeout=5)  # what was live when PyTorch ran out, before the app reacts
        except Exception:
            pass

    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is not None:
        attach(on_out_of_memory)
    if periodic:
        threading.Thread(target=_drain_periodically, args=(drain, stop), name=DRAIN_THREAD_NAME,
                         daemon=True).start()


def on_torch_imported(torch):
    """watch.when_imported('torch', ...) callback: defers everything to CUDA's lazy initialization."""
    record = _native_recorder()
    if record is None:
        _say("--torch-blocks: the preloaded library has no gmt_record_tensor_blocks; the block-level mode is off")
        return
    cuda = getattr(torch, "cuda", None)
    memory = getattr(cuda, "memory", None)
    if cuda is None or not hasattr(memory, "_record_memory_history") or not hasattr(memory, "_snapshot"):
        _say("--torch-blocks: this PyTorch has no torch.cuda.memory._record_memory_history; "
             "the block-level mode is off")
        return

    def start_safely():
        # Runs inside torch.cuda's lazy init: an exception here would become the app's error.
        try:
            _start_recording(torch, record)
        except Exception as error:
            _say(f"--torch-blocks: PyTorch's memory history could not be started ({error!r}); the block-level "
                 f"mode is off")

    lazy_call = getattr(cuda, "_lazy_call", None)
    if lazy_call is not None:
        lazy_call(start_safely)  # runs at once when CUDA is already initialized
    elif cuda.is_initialized():
        start_safely()
    else:
        _say("--torch-blocks: this PyTorch has no torch.cuda._lazy_call; the block-level mode is off")
