"""TEST FIXTURE, not CuPy: see ../../README.md."""
from . import memory
from .memory import MemoryPointer, MemoryPool, UnownedMemory, set_allocator  # noqa: F401
