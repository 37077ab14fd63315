"""CPython's code watchers for the stack memo (recorder/python_code_watch.cpp, unwind/python_frames.h).

On CPython 3.12+ this registers the library's gmt_python_code_event with PyCode_AddWatcher, so that the library
counts the code objects destroyed. The stack memo then tells a Python frame chain seen before by its code objects'
addresses under that count, rather than by reading each code object's file, name and line-table objects: fewer
memory reads per allocation, the same answers. Without it (older Pythons, CPython's watcher slots all taken,
another implementation, GMT_CODE_WATCH=0) the memo reads the code objects as before: nothing is said, nothing
else changes. Watchers belong to one interpreter: this one, the main interpreter, whose frames the recorder reads.
"""
import ctypes
import os
import sys

from . import native
from .environment import CODE_WATCH


def start():
    if sys.version_info < (3, 12) or sys.implementation.name != "cpython" or os.environ.get(CODE_WATCH) == "0":
        return
    event = native.function("gmt_python_code_event", ctypes.c_int, [ctypes.c_int, ctypes.c_void_p])
    started = native.function("gmt_python_code_watch_started", None, [ctypes.c_int])
    if event is None or started is None:
        return
    add_watcher = getattr(ctypes.pythonapi, "PyCode_AddWatcher", None)
    if add_watcher is None:
        return
    add_watcher.restype, add_watcher.argtypes = ctypes.c_int, [ctypes.c_void_p]
    try:
        # ctypes.pythonapi calls with the GIL held, as PyCode_AddWatcher requires; it raises what CPython raised
        # (a RuntimeError when every watcher slot is taken).
        watcher_id = add_watcher(ctypes.cast(event, ctypes.c_void_p).value)
    except Exception:  # noqa: BLE001 - the memo then reads the code objects, as on older Pythons
        return
    started(watcher_id)
