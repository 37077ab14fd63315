"""An app for the tensor-tracking tests, run under `gpumemtrace run --simulate` with the fake torch of
fixtures_tracker/ on PYTHONPATH: a training-like loop that allocates three temporaries per step and keeps one
2 MiB "activation" every step (the leak the report must name), then, with --threads N, N threads that each allocate
and free blocks, with --small-kept N N small blocks kept to the end (4 KiB each), and with --oom a request the fake
allocator cannot satisfy. Prints what the checks compare against, one "key value" per line.

With --allocator-calls it calls empty_cache(), _set_allocator_settings() and set_per_process_memory_fraction(), which
the in-process package records (the fixture's do nothing).

usage: tracker_app.py STEPS [--threads N] [--small-kept N] [--oom] [--allocator-calls]
"""
import sys
import threading
import time

import torch  # the fixture, not PyTorch

STEPS = int(sys.argv[1])
KEPT_BYTES = 2 << 20
TEMP_BYTES = 1 << 20
THREAD_PAIRS = 200
SMALL_BYTES = 4096


def make_activation():
    return torch.empty_block(KEPT_BYTES)  # BLOCK-KEPT: make_activation


def temporary():
    return torch.empty_block(TEMP_BYTES)  # BLOCK-TEMP: temporary


def small():
    return torch.empty_block(SMALL_BYTES)  # BLOCK-SMALL: small


def churn():
    for _ in range(THREAD_PAIRS):
        block = torch.empty_block(4096)  # BLOCK-THREAD: churn
        del block


kept = []
first_ns = time.monotonic_ns()
for step in range(STEPS):
    scratch = [temporary() for _ in range(3)]
    del scratch
    kept.append(make_activation())  # BLOCK-LOOP: kept
last_ns = time.monotonic_ns()
print("first_ns", first_ns)
print("last_ns", last_ns)
if "--threads" in sys.argv:
    count = int(sys.argv[sys.argv.index("--threads") + 1])
    workers = [threading.Thread(target=churn) for _ in range(count)]
    for worker in workers:
        worker.start()
    print("thread_ids", " ".join(str(w.native_id) for w in workers))
    for worker in workers:
        worker.join()
if "--small-kept" in sys.argv:
    kept.extend(small() for _ in range(int(sys.argv[sys.argv.index("--small-kept") + 1])))
if "--oom" in sys.argv:
    try:
        torch.empty_block(1 << 40)  # BLOCK-OOM: too much
    except torch.OutOfMemoryError:
        print("oom raised", True)
if "--allocator-calls" in sys.argv:
    torch.cuda.empty_cache()  # CALL-EMPTY-CACHE
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")  # CALL-SETTINGS
    torch.cuda.set_per_process_memory_fraction(0.25)  # CALL-FRACTION
    print("fixture_calls", ",".join(torch.cuda.memory.calls))
print("done", True)
