"""CuPy's arrays, recorded as the blocks of a heap (schema v9: source cupy_allocator), so that a leak of arrays is
named at the line that made them, and the memory CuPy's pool keeps is "cached at exit", never a leak.

At the CUDA level CuPy shows only the chunks its memory pool takes with cudaMalloc and keeps for reuse. CuPy lets an
app choose the allocator its arrays come from (cupy.cuda.set_allocator) and the allocator a pool takes its chunks
from (cupy.cuda.MemoryPool(allocator)). So when the app imports cupy, before it allocated anything, its default pool
is replaced by an identical pool whose chunk allocator records each chunk (CuPy's own cudaMalloc path,
cupy.cuda.memory._malloc), and arrays are allocated through a recording wrapper around that pool's malloc: each block
it hands out is recorded with the calling thread's stack (its Python frames name the array's line), and wrapped so
that it is recorded as given back when the array lets it go (the block then returns to the pool as before). The same
is done for a chunk when the pool frees it (free_all_blocks). Records go through the preloaded library
(gmt_cupy_pool_action, recorder/framework_calls.h), one ctypes call each; nothing here takes a lock of CuPy's.

cupy.get_default_memory_pool() returns the replacement, so the app's own calls (free_all_blocks, used_bytes,
set_limit) reach it. An app that sets an allocator of its own afterwards (managed memory, RMM) is no longer
recorded at block level; one that had allocated before we could replace the pool, or a CuPy without these entry
points, is left at the CUDA level with one stderr line saying why.
"""
import atexit
import ctypes
import sys

from . import native

ALLOC, FREE, CHUNK_ALLOC, CHUNK_FREE = 1, 2, 3, 4
# False once the interpreter begins to exit (an atexit handler registered at cupy's import: it runs before the
# interpreter's teardown, which frees the arrays still held): what is alive then is what the app held at exit.
_recording = True


def _stop():
    global _recording
    _recording = False


class _Given:
    """Owns one pooled block (or chunk) behind the memory CuPy's array holds; records its end when let go."""

    __slots__ = ("pointer", "device", "action", "record")

    def __init__(self, pointer, device, action, record):
        self.pointer = pointer
        self.device = device
        self.action = action
        self.record = record

    def __del__(self):
        if not _recording:
            return
        try:
            self.record(self.action, self.device, self.pointer.ptr, 0)
        except Exception:  # interpreter teardown: the library may be gone
            pass


def _wrap(cupy, pointer, size, device, action, record):
    """A MemoryPointer to the same memory as `pointer`, whose release is recorded before `pointer` is let go."""
    owner = _Given(pointer, device, action, record)
    memory = cupy.cuda.UnownedMemory(pointer.ptr, size, owner, device)
    return cupy.cuda.MemoryPointer(memory, 0)


def _say(message):
    sys.stderr.write(f"gpumemtrace: {message}\n")


def on_cupy_imported(cupy):
    """watch.when_imported('cupy', ...): replace the default pool by a recording one, before the app allocates."""
    record = native.function("gmt_cupy_pool_action", None,
                             [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64])
    if record is None:
        return
    cuda = getattr(cupy, "cuda", None)
    memory = getattr(cuda, "memory", None)
    needed = (getattr(cupy, "_default_memory_pool", None), getattr(cuda, "MemoryPool", None),
              getattr(cuda, "set_allocator", None), getattr(cuda, "UnownedMemory", None),
              getattr(cuda, "MemoryPointer", None), getattr(memory, "_malloc", None))
    if any(part is None for part in needed):
        return _say(f"CuPy {getattr(cupy, '__version__', '?')}'s arrays are not tracked (it lacks the allocator entry "
                    "points used); its memory is reported at the CUDA level only")
    default = cupy._default_memory_pool
    if default.total_bytes() != 0:
        return _say("CuPy's arrays are not tracked (its pool held memory before we could replace it); its memory is "
                    "reported at the CUDA level only")
    chunk_malloc = memory._malloc

    def recording_chunk(size):
        pointer = chunk_malloc(size)
        device = pointer.device_id
        record(CHUNK_ALLOC, device, pointer.ptr, size)
        return _wrap(cupy, pointer, size, device, CHUNK_FREE, record)

    pool = cuda.MemoryPool(recording_chunk)

    def recording_malloc(size):
        pointer = pool.malloc(size)
        if not pointer.ptr or not _recording:  # a zero-size array has no memory
            return pointer
        held = pointer.mem.size
        device = pointer.device_id
        record(ALLOC, device, pointer.ptr, held)  # the stack of this thread: the array's line
        return _wrap(cupy, pointer, held, device, FREE, record)

    cupy._default_memory_pool = pool
    cuda.set_allocator(recording_malloc)
    atexit.register(_stop)
