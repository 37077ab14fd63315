"""TEST FIXTURE, not PyTorch: see ../README.md. A tensor is a block of the fake caching allocator in lib/."""
import ctypes
import os

from . import _C, autograd, cuda, version

__version__ = os.environ.get("FIXTURE_TORCH_VERSION", "2.11.0+fixture")  # another release: gpumemtrace whatif's guard

_library = None


def _c10_cuda():
    global _library
    if _library is None:
        _library = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libc10_cuda.so"),
                               mode=ctypes.RTLD_GLOBAL)
        _library.fixture_allocate.restype = ctypes.c_size_t
        _library.fixture_allocate.argtypes = [ctypes.c_size_t]
        _library.fixture_release.argtypes = [ctypes.c_size_t]
        _library.fixture_init.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
        _library.fixture_backward.restype = ctypes.c_size_t
        _library.fixture_backward.argtypes = [ctypes.c_size_t, ctypes.c_int]
    return _library


class OutOfMemoryError(RuntimeError):
    pass


class Tensor:
    def __init__(self, size):
        cuda.init()
        self.address = _c10_cuda().fixture_allocate(size)
        if self.address == 0:
            raise OutOfMemoryError(f"fixture: no block of {size} bytes left")
        self.size = size

    def backward(self, hold_ms=0):
        """As PyTorch's Tensor.backward: through torch.autograd.backward, looked up at each call."""
        autograd.backward(self, hold_ms=hold_ms)

    def __del__(self):
        if getattr(self, "address", 0):
            _c10_cuda().fixture_release(self.address)


def empty_block(size):
    """A 'tensor' of `size` bytes: one block of the fixture's caching allocator."""
    return Tensor(size)
