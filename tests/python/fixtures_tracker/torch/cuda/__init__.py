"""TEST FIXTURE, not PyTorch: lazy CUDA initialization as torch.cuda has it (_lazy_call queues until init)."""
import ctypes
import os

from . import memory
from .memory import empty_cache, set_per_process_memory_fraction  # as torch.cuda re-exports them

_initialized = False
_queued_calls = []
SEGMENT_BYTES = 256 << 20


def is_initialized():
    return _initialized


def get_allocator_backend():
    return os.environ.get("FIXTURE_ALLOCATOR_BACKEND", "native")


def _lazy_call(callable):
    if _initialized:
        callable()
    else:
        _queued_calls.append(callable)


def init():
    """What the first CUDA use does in PyTorch: the runtime is loaded, the allocator made, queued calls run."""
    global _initialized
    if _initialized:
        return
    import torch
    # Resolved in the global scope, as PyTorch's libc10_cuda imports it: there the preloaded hooks see the call.
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    cudart = ctypes.CDLL(None)
    pointer = ctypes.c_void_p()
    if cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(SEGMENT_BYTES)) != 0:
        raise RuntimeError("cudaMalloc of the segment failed")
    torch._c10_cuda().fixture_init(pointer.value, SEGMENT_BYTES)
    _initialized = True
    for call in _queued_calls:
        call()
    _queued_calls.clear()
