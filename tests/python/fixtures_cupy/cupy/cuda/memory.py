"""TEST FIXTURE, not CuPy: see ../../README.md. Chunks from the simulated runtime's cudaMalloc, resolved in the
global scope as CuPy's runtime module calls it, so that the preloaded hooks see each one."""
import collections
import ctypes

_cudart = None


def _runtime():
    global _cudart
    if _cudart is None:
        ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
        _cudart = ctypes.CDLL(None)
        _cudart.cudaFree.argtypes = [ctypes.c_void_p]
    return _cudart


class OutOfMemoryError(MemoryError):
    pass


class Memory:
    """A chunk of device memory of its own (cudaMalloc), freed when let go."""

    def __init__(self, size):
        self.size = size
        self.device_id = 0
        pointer = ctypes.c_void_p()
        if _runtime().cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size)) != 0:
            raise OutOfMemoryError(f"fixture: cudaMalloc of {size} bytes failed")
        self.ptr = pointer.value or 0

    def __del__(self):
        if getattr(self, "ptr", 0):
            _runtime().cudaFree(self.ptr)


class UnownedMemory:
    def __init__(self, ptr, size, owner, device_id=None):
        self.ptr = ptr
        self.size = size
        self.device_id = 0 if device_id is None else device_id
        self._owner = owner


class MemoryPointer:
    def __init__(self, mem, offset):
        self.mem = mem
        self.ptr = mem.ptr + offset
        self.device_id = mem.device_id


def _malloc(size):
    return MemoryPointer(Memory(size), 0)


class _PooledMemory:
    """A block handed out by a pool: back into the pool's cache when let go."""

    def __init__(self, pool, chunk):
        self.pool = pool
        self.chunk = chunk
        self.ptr = chunk.ptr
        self.size = chunk.mem.size
        self.device_id = chunk.device_id

    def __del__(self):
        self.pool._give_back(self.chunk)


class MemoryPool:
    def __init__(self, allocator=None):
        self._allocator = allocator or _malloc
        self._free = collections.defaultdict(list)  # rounded size -> cached chunks
        self._used = 0
        self._total = 0

    def malloc(self, size):
        rounded = (size + 511) // 512 * 512
        if rounded == 0:
            return MemoryPointer(UnownedMemory(0, 0, None), 0)
        cached = self._free[rounded]
        if cached:
            chunk = cached.pop()
        else:
            chunk = self._allocator(rounded)
            self._total += rounded
        self._used += rounded
        return MemoryPointer(_PooledMemory(self, chunk), 0)

    def _give_back(self, chunk):
        self._used -= chunk.mem.size
        self._free[chunk.mem.size].append(chunk)

    def free_all_blocks(self):
        for size, chunks in self._free.items():
            self._total -= size * len(chunks)
            chunks.clear()

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._total


_current_allocator = None


def set_allocator(allocator=None):
    global _current_allocator
    _current_allocator = allocator or _malloc
