"""An app for the block-level mode's tests, run under `gpumemtrace run --simulate --torch-blocks` with the fake
torch of fixtures_blocks/ on PYTHONPATH: a training-like loop that allocates three temporaries per step and keeps
one 2 MiB "activation" every step (the leak the report must name), with drains forced every DRAIN_EVERY steps
and a simulated out-of-memory at the end. Prints what the checks compare against, one "key value" per line.

usage: blocks_app.py STEPS DRAIN_EVERY [--wait-for-drain-thread]
  --wait-for-drain-thread: after the loop, wait (up to 10 s) until the mode's own thread has taken a snapshot,
  then print which threads imported what of torch.
"""
import json
import sys
import threading
import time

_imports = []  # (thread name, module) of every module torch.* loaded, as the import audit event reports them


def _audit_imports(event, args):
    if event == "import" and str(args[0]).startswith("torch"):
        _imports.append((threading.current_thread().name, args[0]))


sys.addaudithook(_audit_imports)

import torch  # the fixture, not PyTorch
from torch.cuda import memory

STEPS = int(sys.argv[1])
DRAIN_EVERY = int(sys.argv[2])
KEPT_BYTES = 2 << 20
TEMP_BYTES = 1 << 20


def drain():
    import gpumemtrace_inprocess.torch_blocks as blocks
    return blocks.drain_now()


def make_activation():
    return torch.empty_block(KEPT_BYTES)  # BLOCK-KEPT: make_activation


def temporary():
    return torch.empty_block(TEMP_BYTES)  # BLOCK-TEMP: temporary


print("history_started_at_import", memory._history is not None)
torch.cuda.init()
print("history", json.dumps(memory._history))
print("history_before_init", memory._history_before_init)
kept = []
first_ns = time.monotonic_ns()
for step in range(STEPS):
    scratch = [temporary() for _ in range(3)]
    del scratch
    kept.append(make_activation())  # BLOCK-LOOP: kept
    if (step + 1) % DRAIN_EVERY == 0:
        drain()
    time.sleep(0.002)
last_ns = time.monotonic_ns()
if "--wait-for-drain-thread" in sys.argv:
    deadline = time.monotonic() + 10
    while memory._snapshot_threads <= {"MainThread"} and time.monotonic() < deadline:
        time.sleep(0.05)
    print("snapshot_threads", json.dumps(sorted(memory._snapshot_threads)))
    print("imports", json.dumps(_imports))
    inductor = sys.modules.get("torch._inductor")
    print("inductor_imported_by", inductor.imported_by if inductor else "nobody")
snapshots_before_oom = memory._snapshots
memory.simulate_oom(1 << 40)
print("oom_drained", memory._snapshots > snapshots_before_oom)
print("first_ns", first_ns)
print("last_ns", last_ns)
