"""An app for the backward-linking tests, run under `gpumemtrace run --simulate` with the fake torch of
fixtures_tracker/ on PYTHONPATH: a loop whose backward() calls allocate a gradient on autograd's (fake) worker thread,
kept with its tensor (the leak the report must link to the backward() line), then, with --overlap, two threads whose
backward() calls run at the same time (their gradients: "during backward()" without a line).

usage: autograd_app.py STEPS [--overlap]
"""
import sys
import threading

import torch  # the fixture, not PyTorch

STEPS = int(sys.argv[1])
PARAM_BYTES = 1 << 20
OVERLAP_BYTES = 3 << 20


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
print("done", True)
