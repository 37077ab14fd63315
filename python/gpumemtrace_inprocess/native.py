"""The preloaded gpumemtrace library, as seen from Python (ctypes).

`gpumemtrace run` preloads libgpumemtrace.so and names it in GMT_LIBRARY; loading that path again returns the
handle already in the process, so the functions below write into the same trace as the CUDA-level hooks. ctypes
releases the GIL around each call, and each exported function only appends to the recorder's buffers.
"""
import ctypes
import os

from .environment import LIBRARY

_library = None
_loaded = False


def library():
    """The preloaded library, or None when this process is not being profiled (e.g. GMT_LIBRARY unset)."""
    global _library, _loaded
    if not _loaded:
        _loaded = True
        path = os.environ.get(LIBRARY, "")
        if path:
            try:
                _library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 0))
            except OSError:
                _library = None
    return _library


def available():
    return library() is not None


def function(name, restype, argtypes):
    """An exported function of the library with its C signature, or None when the library lacks it."""
    lib = library()
    if lib is None or not hasattr(lib, name):
        return None
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = argtypes
    return fn
