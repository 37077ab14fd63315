"""TEST FIXTURE, not PyTorch: the memory history ring and a first-fit allocator of blocks in one segment."""
import collections
import os
import sys
import threading
import time

_history = None          # the settings of the last _record_memory_history call
_history_before_init = False
_ring = collections.deque()
_snapshots = 0
_snapshot_threads = set()  # the names of the threads that took snapshots
_segment_base = 0
_free = []               # (address, size) of freed blocks, reused first-fit
_next = 0
_FIXTURE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, skip_actions=None):
    global _history, _history_before_init, _ring
    from . import is_initialized
    _history = {"enabled": enabled, "context": context, "stacks": stacks, "max_entries": max_entries,
                "skip_actions": list(skip_actions or [])}
    _history_before_init = not is_initialized()
    _ring = collections.deque(_ring, maxlen=max_entries)


def _snapshot():
    global _snapshots
    _snapshots += 1
    _snapshot_threads.add(threading.current_thread().name)
    if any(entry["frames"] for entry in _ring):
        # PyTorch's symbolizer, before it names the Python frames: hasattr(torch, "_inductor") (which imports it).
        import torch
        hasattr(torch, "_inductor")
    return {"segments": [], "device_traces": [list(_ring)], "allocator_settings": {}, "external_annotations": []}


def _python_frames():
    """The caller's Python frames, innermost first, without the fixture's own (PyTorch's C++ does the same)."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_FIXTURE_DIR):
            frames.append({"name": frame.f_code.co_name, "filename": filename, "line": frame.f_lineno})
        frame = frame.f_back
    return frames


def _trace(action, address, size, frames=()):
    if _history is not None and action not in _history["skip_actions"]:
        _ring.append({"action": action, "addr": address, "size": size, "stream": 0,
                      "time_us": time.time_ns() // 1000, "compile_context": "", "user_metadata": "",
                      "frames": list(frames)})


def _allocate(size):
    global _next
    for i, (address, free_size) in enumerate(_free):
        if free_size == size:
            del _free[i]
            return address
    address = _segment_base + _next
    _next += size
    return address


class Tensor:
    def __init__(self, size):
        self.size = size
        self.address = _allocate(size)
        _trace("alloc", self.address, size, _python_frames() if _history and _history["context"] else ())

    def __del__(self):
        _trace("free_requested", self.address, self.size)
        _trace("free_completed", self.address, self.size)
        _free.append((self.address, self.size))


def simulate_oom(request):
    """PyTorch's allocator failing a request: its observers run (device, alloc, device_allocated, device_free)."""
    from .. import _C
    _trace("oom", 0, request)
    for observer in _C._oom_observers:
        observer(0, request, _next, 0)
