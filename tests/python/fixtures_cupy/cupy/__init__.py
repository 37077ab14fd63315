"""TEST FIXTURE, not CuPy: see ../README.md. Arrays take their memory from the current allocator, which is the
default pool's malloc at import, as in CuPy."""
from . import cuda

__version__ = "14.0.0+fixture"


class ndarray:
    def __init__(self, nbytes):
        self.nbytes = nbytes
        self.data = cuda.memory._current_allocator(nbytes)


def empty(nbytes):
    return ndarray(nbytes)


# set default allocator (as CuPy's cupy/__init__.py does)
_default_memory_pool = cuda.MemoryPool()
cuda.set_allocator(_default_memory_pool.malloc)


def get_default_memory_pool():
    return _default_memory_pool
