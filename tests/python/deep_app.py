"""Python stacks that are harder to read than ctypes_app.py's: a deep recursion, a generator, a Python
callback that native code (libc's qsort, through ctypes) calls, so that native frames sit between two runs of
Python frames, a profile hook that allocates when a function is called, before that function has run an
instruction, and an __init__ called often enough to be specialized (3.13 then runs it under a shim frame).
Each site leaks allocations of its own size through the CUDA runtime (ctypes, GIL released); the PY-LEAK
markers name the lines the report must show.

usage: deep_app.py DEPTH   (the recursion's depth)
"""
import ctypes
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
LIBC = ctypes.CDLL(None)

RECURSION_BYTES, GENERATOR_BYTES, CALLBACK_BYTES, PROFILE_BYTES, INIT_BYTES = 4000, 5000, 6000, 7000, 100
INIT_CALLS = 20


def cuda_malloc(size):
    pointer = ctypes.c_void_p()
    error = LIBC.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # PY-LEAK: cuda_malloc
    if error != 0:
        raise RuntimeError(f"cudaMalloc failed: {error}")
    return pointer.value


def recurse(depth):
    if depth > 0:
        return recurse(depth - 1)  # PY-LEAK: recurse
    return cuda_malloc(RECURSION_BYTES)  # PY-LEAK: recurse.bottom


def buffers():
    yield cuda_malloc(GENERATOR_BYTES)  # PY-LEAK: buffers


COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
allocated_in_callback = []


def compare(a, b):
    if not allocated_in_callback:
        allocated_in_callback.append(cuda_malloc(CALLBACK_BYTES))  # PY-LEAK: compare
    return a[0] - b[0]


def sort_with_callback():
    values = (ctypes.c_int * 2)(2, 1)
    LIBC.qsort(values, 2, ctypes.sizeof(ctypes.c_int), COMPARE(compare))  # PY-LEAK: sort_with_callback
    assert list(values) == [1, 2]


def profile_hook(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "profiled":
        cuda_malloc(PROFILE_BYTES)  # PY-LEAK: profile_hook


def profiled():  # PY-LEAK: profiled
    return 0


def call_profiled():
    sys.setprofile(profile_hook)
    profiled()  # PY-LEAK: call_profiled
    sys.setprofile(None)


class Buffer:
    def __init__(self):
        self.pointer = cuda_malloc(INIT_BYTES)  # PY-LEAK: Buffer.__init__


def main(depth):
    recurse(depth)  # PY-LEAK: main.recurse
    next(buffers())  # PY-LEAK: main.buffers
    sort_with_callback()  # PY-LEAK: main.sort_with_callback
    call_profiled()  # PY-LEAK: main.call_profiled
    for _ in range(INIT_CALLS):
        Buffer()  # PY-LEAK: main.Buffer
    leaked = RECURSION_BYTES + GENERATOR_BYTES + CALLBACK_BYTES + PROFILE_BYTES + INIT_CALLS * INIT_BYTES
    print(f"truth: leaked_bytes={leaked} leaked_allocations={4 + INIT_CALLS} failed_allocations=0")


if __name__ == "__main__":
    main(int(sys.argv[1]))  # PY-LEAK: <module>
