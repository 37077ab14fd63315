"""Allocations from the same Python places round after round, as a training or serving loop makes them, for the
stack memo and the walker's cut (recorder/stacks.cpp): a stack taken again under the same Python frames is
answered without walking beyond CPython's eval loop. Modules nested the way PyTorch's are (an instance called
through __call__, so each level enters the eval loop again from native code), allocating through ctypes (GIL
released). Each place leaks allocations of its own size; the PY-LEAK markers name the lines the report must show.

With TWO_PATHS_LIBRARY (tests/stacks/stack_memo_places.cpp, call_through_cut), one Python line also calls native
code that calls back into Python by one of two native paths, alternately: the case the cut cannot tell apart.

usage: cut_app.py ROUNDS [TWO_PATHS_LIBRARY]
"""
import ctypes
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
LIBC = ctypes.CDLL(None)
KEPT_BYTES, OUTER_BYTES, TEMPORARY_BYTES, CALLBACK_BYTES, SIX_LINES_BYTES = 1000, 2000, 1500, 3000, 500

leaked = {"bytes": 0, "count": 0}


def cuda_malloc(size):
    pointer = ctypes.c_void_p()
    if LIBC.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) != 0:  # PY-LEAK: cuda_malloc
        raise RuntimeError("cudaMalloc failed")
    return pointer.value


def keep(size):
    cuda_malloc(size)  # PY-LEAK: keep
    leaked["bytes"] += size
    leaked["count"] += 1


class Inner:
    def __call__(self):
        keep(KEPT_BYTES)  # PY-LEAK: Inner.__call__
        LIBC.cudaFree(ctypes.c_void_p(cuda_malloc(TEMPORARY_BYTES)))


class Outer:
    def __init__(self):
        self.inner = Inner()

    def __call__(self):
        self.inner()  # PY-LEAK: Outer.__call__
        keep(OUTER_BYTES)  # PY-LEAK: Outer.keeps


def from_six_lines():
    """One native place (the same walk) under six Python chains: the memo keeps each chain's stack."""
    keep(SIX_LINES_BYTES)  # PY-LEAK: from_six_lines
    keep(SIX_LINES_BYTES)
    keep(SIX_LINES_BYTES)
    keep(SIX_LINES_BYTES)
    keep(SIX_LINES_BYTES)
    keep(SIX_LINES_BYTES)


def on_callback():
    keep(CALLBACK_BYTES)  # PY-LEAK: on_callback


def main():
    rounds = int(sys.argv[1])
    two_paths = ctypes.CDLL(sys.argv[2]) if len(sys.argv) > 2 else None
    callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda _: on_callback())
    model = Outer()
    for round_number in range(rounds):
        model()  # PY-LEAK: main
        from_six_lines()
        if two_paths:
            two_paths.call_through_cut(round_number % 2, callback, None)  # PY-LEAK: by_path
    print(f"truth: leaked_bytes={leaked['bytes']} leaked_allocations={leaked['count']} failed_allocations=0")


if __name__ == "__main__":
    main()
