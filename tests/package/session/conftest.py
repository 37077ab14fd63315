"""The session that tests/package runs under `pytest --gpumemtrace --gpumemtrace-simulate`: CUDA memory through the
runtime's C API (ctypes), so that it needs no framework; under --gpumemtrace-simulate the runtime is the simulated
one. The LEAK-LINE / PEAK-LINE markers name the lines the failure messages must show."""
import ctypes

import pytest

# Called through the process's global scope, as an extension module's PLT would (tests/python/ctypes_app.py).
ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
CUDART = ctypes.CDLL(None)
MiB = 1 << 20


def free(pointer):
    assert CUDART.cudaFree(ctypes.c_void_p(pointer)) == 0


@pytest.fixture(scope="session")
def workspace():
    pointer = ctypes.c_void_p()
    assert CUDART.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(2 * MiB)) == 0  # held for the whole session
    yield pointer.value
    free(pointer.value)
