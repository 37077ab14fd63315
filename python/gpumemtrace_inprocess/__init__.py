"""gpumemtrace's hooks inside a profiled Python process (started by sitecustomize.py).

What runs here is framework-level and optional: the CUDA-level trace (every cudaMalloc, cuMemCreate, ...) is
written by the preloaded native library whatever happens in this package. Each part below is independent, starts
only once the app has imported its framework, and reports a failure once on stderr and switches itself off.

Rules for code in this package (it runs inside the user's process):
- never import torch, cupy or jax ourselves, and never initialize CUDA: wait until the app did;
- never raise into the app; no work on the app's threads beyond a few attribute reads;
- records go to the trace through the native library (native.py), which owns the only SQLite connection.

Importing the package itself loads nothing (sitecustomize.py reads environment.py before it knows whether to start).
"""
_started = False


def start():
    """Called once per process by sitecustomize.py. Cheap: the parts that need a framework wait for it."""
    global _started
    if _started:
        return
    _started = True
    from . import native
    if not native.available():
        # Not profiled after all: a child started with a cleaned environment keeps PYTHONPATH but not
        # LD_PRELOAD. Nothing to record into; stay silent, as an unprofiled process would be.
        return
    _start_part("allocator statistics", "allocator_stats")
    _start_part("code object watchers", "code_watch")  # cheaper Python chain keys on 3.12+ (code_watch.py)
    from . import autograd_calls, torch_tracker, watch
    if torch_tracker.enabled():
        watch.when_imported("torch", torch_tracker.on_torch_imported)
        # backward()'s tensors need their calls marked only where tensors are recorded
        watch.when_imported("torch", autograd_calls.on_torch_imported)
    from . import cupy_tracker
    if torch_tracker.enabled():  # the same switch: frameworks' blocks (run --no-torch-blocks turns both off)
        watch.when_imported("cupy", cupy_tracker.on_cupy_imported)


def _start_part(what, module_name):
    import importlib
    import sys
    try:
        importlib.import_module(f"{__name__}.{module_name}").start()
    except Exception as error:  # one part failing leaves the others and the app alone
        sys.stderr.write(f"gpumemtrace: the {what} are off: {error!r}\n")
