"""An app for the backward-linking tests, run under `gpumemtrace run --simulate` with the fake torch of
fixtures_tracker/ on PYTHONPATH: a loop whose backward() calls allocate a gradient on autograd's (fake) worker thread,
kept with its tensor (the leak the report must link to the backward() line), then, with --overlap, two threads whose
backward() calls run at the same time (their gradients: "during backward()" without a line).

With --bystander, another thread of the app allocates from its own Python line while a backward() call runs (a data
loader, say): its block is not backward()'s.

usage: autograd_app.py STEPS [--overlap] [--bystander]
"""
import sys
import threading

import torch  # the fixture, not PyTorch

STEPS = int(sys.argv[1])
PARAM_BYTES = 1 << 20
OVERLAP_BYTES = 3 << 20
BYSTANDER_BYTES = 5 << 20


def train(kept):
    for _ in range(STEPS):
        weight = torch.empty_block(PARAM_BYTES)  # PARAM-LINE
        weight.backward()  # BACKWARD-LINE
        kept.append(weight)


kept = []
train(kept)
if "--overlap" in sys.argv:
    both = threading.Barrier(2)

    def overlapping():
        weight = torch.empty_block(OVERLAP_BYTES)  # OVERLAP-PARAM-LINE
        both.wait()  # both calls begin together; each worker allocates 300 ms into its call, ends 300 ms later
        weight.backward(hold_ms=300)  # OVERLAP-BACKWARD-LINE
        kept.append(weight)

    workers = [threading.Thread(target=overlapping) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
if "--bystander" in sys.argv:
    import time

    def bystander():
        time.sleep(0.15)  # inside the call below, which lasts ~600 ms
        kept.append(torch.empty_block(BYSTANDER_BYTES))  # BYSTANDER-LINE

    other = threading.Thread(target=bystander)
    weight = torch.empty_block(OVERLAP_BYTES)
    other.start()
    weight.backward(hold_ms=300)
    other.join()
    kept.append(weight)
print("done", True)
