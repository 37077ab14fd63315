"""A program that pauses gpumemtrace's recording around some of its allocations, as bench/torch_step_ab.py
does, through gmt_set_recording_paused in the preloaded library (named by GMT_LIBRARY). Prints
what it expects the trace to hold: the allocations made while recording ran, and as leaks also the one freed
during the pause (its free is not recorded).

usage: pause_app.py [--no-pause]
"""
import ctypes
import os
import sys
import time

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
CUDA = ctypes.CDLL(None)
PROFILER = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
set_paused = PROFILER.gmt_set_recording_paused
set_paused.argtypes, set_paused.restype = [ctypes.c_int], ctypes.c_int


def malloc(size):
    pointer = ctypes.c_void_p()
    assert CUDA.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) == 0
    return pointer.value


def free(pointer):
    assert CUDA.cudaFree(ctypes.c_void_p(pointer)) == 0


pause = "--no-pause" not in sys.argv
kept_before = malloc(1000)
freed_in_pause = malloc(500)
if pause:
    print("was paused:", set_paused(1))
    print("was paused:", set_paused(1))  # already paused: no second pause
made_in_pause = malloc(7000)
free(freed_in_pause)
time.sleep(0.05)
if pause:
    print("was paused:", set_paused(0))
kept_after = malloc(3000)
freed_after = malloc(2000)  # larger than the hole the 500 B block left: its address stays unused
free(freed_after)
