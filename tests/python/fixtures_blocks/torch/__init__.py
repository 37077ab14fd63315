"""TEST FIXTURE, not PyTorch: see ../README.md. A tensor is a block of the fake caching allocator."""
import importlib

from . import _C, cuda
from .cuda.memory import Tensor as _Tensor

_LAZY_SUBMODULES = {"_inductor"}  # as torch/__init__.py: asking for the attribute imports the submodule


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def empty_block(size):
    """A 'tensor' of `size` bytes: one alloc entry in the history, with the caller's Python frames."""
    return _Tensor(size)
