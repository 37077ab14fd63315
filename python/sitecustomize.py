"""gpumemtrace's entry into a profiled Python process.

`gpumemtrace run` puts this file's folder first on PYTHONPATH, so CPython's `site` module imports it at start-up in
every Python process of the run (torchrun workers and multiprocessing children inherit the variable). It does two
things and never raises:

1. it chains to the sitecustomize the process would have imported without us (a virtualenv's, a cluster's), so
   that the app behaves as it would unprofiled;
2. it starts gpumemtrace's in-process framework hooks (package gpumemtrace_inprocess), which stay idle until the
   app itself imports PyTorch, CuPy or JAX. They never import a framework and never initialize CUDA themselves.
"""
import os
import sys


def _chain_to_the_next_sitecustomize():
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    ours = sys.modules.get("sitecustomize")
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # The app's own sitecustomize failed: it would have failed without us too. site prints such an error and
        # goes on; so do we, and keep our module registered.
        sys.modules["sitecustomize"] = ours
        raise


def _start_gpumemtrace():
    try:
        from gpumemtrace_inprocess.environment import PYTHON_HOOKS  # the names of schema/environment.h
        if os.environ.get(PYTHON_HOOKS, "0") != "1":
            return
        import gpumemtrace_inprocess
        gpumemtrace_inprocess.start()
    except Exception as error:  # never let the profiler stop the app
        sys.stderr.write(f"gpumemtrace: the Python framework hooks are off: {error!r}\n")


try:
    _chain_to_the_next_sitecustomize()
finally:
    _start_gpumemtrace()
