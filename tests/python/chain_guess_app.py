"""Python chains that share frames with the chain before them in every way the chain key's guess must tell apart
(unwind/python_frames.cpp, ChainGuess: each frame's address taken from the previous key's chain, used once the live
chain names it): one helper reached from two callers at one depth (the same frame addresses, another code object
one frame out), recursion that goes deeper and shallower by turns (the innermost frame found further in or out of
the previous chain), a generator resumed from two depths (its frame lives in the generator, not on the frame stack,
and names another frame before it each time), a function called back from C (map) at two depths, and a chain deeper
than the guess holds. Each allocation leaks a size of its own, from which the test knows
the Python functions its stack must name, innermost first.

usage: chain_guess_app.py ROUNDS
"""
import ctypes
import sys

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
LIBC = ctypes.CDLL(None)
DEPTHS = (1, 5, 12, 3, 9, 2, 12, 1)  # recursion depths in turn
DEEP = 90  # frames deeper than the guess holds (64)
leaked = [0, 0]


def allocate(size):
    pointer = ctypes.c_void_p()
    LIBC.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))
    leaked[0] += size
    leaked[1] += 1


def helper(size):
    allocate(size)


def caller_a(size):
    helper(size)


def caller_b(size):
    helper(size)


def dive(levels, size):
    if levels == 0:
        allocate(size)
    else:
        dive(levels - 1, size)


def producer(base):
    number = 0
    while True:
        allocate(base + number)
        number += 1
        yield


def driver_one(generator):
    next(generator)


def relay(generator):
    next(generator)


def driver_two(generator):
    relay(generator)


def mapped_one(size):
    list(map(helper, [size]))


def mapped_relay(size):
    list(map(helper, [size]))


def mapped_two(size):
    mapped_relay(size)


def main():
    rounds = int(sys.argv[1])
    generator = producer(400_000)
    for round_number in range(rounds):
        size = 100_000 + 16 * round_number
        caller_a(size)  # sizes 100000 + 16 r (a), + 1 (b): helper at one depth, another caller
        caller_b(size + 1)
        for turn, levels in enumerate(DEPTHS):
            dive(levels, 200_000 + 1000 * levels + 16 * round_number + turn % 8)
        driver_one(generator)  # sizes 400000 + 2 r (one), + 1 (two, one frame deeper)
        driver_two(generator)
        mapped_one(500_000 + 2 * round_number)
        mapped_two(500_000 + 2 * round_number + 1)
        dive(DEEP, 300_000 + round_number)
    print(f"truth: leaked_bytes={leaked[0]} leaked_allocations={leaked[1]} failed_allocations=0")


if __name__ == "__main__":
    main()
