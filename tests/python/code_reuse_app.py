"""Code objects freed and new ones made at the same addresses, round after round, each allocating from the same
native place and the same Python lines: what a stack memo keyed by code objects' addresses must tell apart
(unwind/python_frames.h; on 3.12+ the code watcher's count, recorder/python_code_watch.cpp). Each round compiles
the same source under a file name of its own (gen_<round>.py), calls its function CALLS_PER_ROUND times, each call
leaking one allocation of 1000 + round bytes, and drops the code. Prints how many rounds ran a code object at an
address an earlier round's had used (the premise: without reuse nothing is tested) and the truth line of the
samples.

usage: code_reuse_app.py ROUNDS
"""
import ctypes
import gc
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
LIBC = ctypes.CDLL(None)
CALLS_PER_ROUND = 4

SOURCE = '''
def allocate(size):
    pointer = ctypes.c_void_p()
    LIBC.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))
'''


def main():
    rounds = int(sys.argv[1])
    seen, reused, leaked = set(), 0, 0
    for round_number in range(rounds):
        namespace = {"ctypes": ctypes, "LIBC": LIBC}
        exec(compile(SOURCE, f"gen_{round_number}.py", "exec"), namespace)
        allocate = namespace["allocate"]
        address = id(allocate.__code__)
        reused += address in seen
        seen.add(address)
        # Later calls: the same stack again, under the same code objects, for the memo to answer (the first call or
        # two of a new function take other native paths, until CPython has specialized its instructions).
        for _ in range(CALLS_PER_ROUND):
            allocate(1000 + round_number)
        leaked += CALLS_PER_ROUND * (1000 + round_number)
        del namespace, allocate
        gc.collect()
    print(f"code objects at a reused address: {reused} of {rounds}")
    print(f"truth: leaked_bytes={leaked} leaked_allocations={CALLS_PER_ROUND * rounds} failed_allocations=0")


if __name__ == "__main__":
    main()
