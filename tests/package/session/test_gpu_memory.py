"""Tests with known GPU memory behaviour (see conftest.py): two fail their markers, the rest pass."""
import ctypes

import pytest
from conftest import CUDART, MiB, free

KEPT = []  # what the leaking tests keep: still held after they end


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_leaks_over_limit(workspace):
    pointer = ctypes.c_void_p()
    assert CUDART.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(3 * MiB)) == 0  # LEAK-LINE
    KEPT.append(pointer.value)


@pytest.mark.limit_gpu_leaks("1 MiB")
@pytest.mark.limit_gpu_peak("8 MiB")
def test_clean_under_limits(workspace):
    pointer = ctypes.c_void_p()
    assert CUDART.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(4 * MiB)) == 0
    free(pointer.value)


@pytest.mark.limit_gpu_peak("2 MiB")
def test_peak_over_limit():
    pointer = ctypes.c_void_p()
    assert CUDART.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(5 * MiB)) == 0  # PEAK-LINE
    free(pointer.value)


def test_small_leak_without_marker():
    pointer = ctypes.c_void_p()
    assert CUDART.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(64 * 1024)) == 0
    KEPT.append(pointer.value)
