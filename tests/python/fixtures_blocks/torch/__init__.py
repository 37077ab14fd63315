"""TEST FIXTURE, not PyTorch: see ../README.md. A tensor is a block of the fake caching allocator."""
from . import _C, cuda
from .cuda.memory import Tensor as _Tensor


def empty_block(size):
    """A 'tensor' of `size` bytes: one alloc entry in the history, with the caller's Python frames."""
    return _Tensor(size)
