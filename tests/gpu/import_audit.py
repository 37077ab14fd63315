"""Runs a Python script as __main__ with an audit hook that logs imports made by threads other than the main one,
and the imports of torch._dynamo and torch._inductor on any thread, as "IMPORT <seconds> [<thread>] <module>"
lines on stderr. The block-level mode's test runs its sample through it: PyTorch's circular imports can break
when a module is imported from another thread at the same time, and that is what these lines show.

usage: import_audit.py SCRIPT [ARGS...]
"""
import runpy
import sys
import threading
import time

_START = time.monotonic()


def _log_import(event, args):
    if event != "import":
        return
    name = args[0]
    thread = threading.current_thread()
    if thread is not threading.main_thread() or (name.startswith(("torch._dynamo", "torch._inductor"))
                                                 and name.count(".") <= 2):
        sys.stderr.write(f"IMPORT {time.monotonic() - _START:8.3f} [{thread.name}] {name}\n")


sys.addaudithook(_log_import)
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
