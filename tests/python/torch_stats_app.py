"""An app of the fake torch package (tests/python/fixtures/torch, a TEST FIXTURE): it scripts the caching
allocator's statistics around NVTX steps, an out-of-memory error and the exit, so that the allocator_stats rows
gpumemtrace records can be checked exactly. Each step waits until the sampler read the statistics (the fixture
counts memory_stats calls), so the test does not depend on timing.

usage: torch_stats_app.py steps [SPLIT_SCALE]   scripted figures (inactive split bytes times SPLIT_SCALE)
       torch_stats_app.py cadence              CUDA initialised after 0.3 s, then 0.5 s of periodic samples
       torch_stats_app.py short                the sampler looks once while nothing is in use, then the app exits
"""
import sys
import time

import torch

MiB = 1 << 20
fixture = torch.cuda._fixture


def sampled_after(before):
    fixture.wait_for_stats_call(0, before)
    time.sleep(0.05)  # the record follows the statistics call in the sampler thread


def steps(split_scale):
    def figures(allocated, reserved, split, retries, ooms=0):
        return dict(allocated=allocated * MiB, reserved=reserved * MiB, inactive_split=int(split * MiB * split_scale),
                    retries=retries, ooms=ooms)

    torch.cuda.init()
    kept = torch.empty(3 * MiB, dtype=torch.uint8)  # CUDA-level memory, live at the OOM and at exit

    before = fixture.stats_calls[0]
    torch.cuda.nvtx.range_push("step")
    fixture.set_stats(0, **figures(100, 256, 8, 0))
    torch.cuda.nvtx.range_pop()
    sampled_after(before)

    before = fixture.stats_calls[0]
    torch.cuda.nvtx.range_push("step")
    torch.cuda.nvtx.range_push("forward")
    fixture.set_stats(0, **figures(900, 1000, 1, 1))
    torch.cuda.nvtx.range_pop()  # depth 1: no sample
    time.sleep(0.2)
    print(f"nested range end sampled: {fixture.stats_calls[0] != before}")
    fixture.set_stats(0, **figures(600, 1024, 300, 2))
    torch.cuda.nvtx.range_pop()
    sampled_after(before)

    fixture.set_stats(0, **figures(700, 1024, 200, 3))
    try:
        torch.empty(1 << 50, dtype=torch.uint8)
    except torch.cuda.OutOfMemoryError as error:
        print(f"caught: {error}")
    fixture.set_stats(0, **figures(50, 768, 100, 3, ooms=1))
    del kept


def cadence():
    time.sleep(0.3)
    print(f"init_monotonic_ns {time.monotonic_ns()}")
    torch.cuda.init()
    fixture.set_stats(0, allocated=5 * MiB, reserved=20 * MiB, inactive_split=0, retries=0, ooms=0)
    time.sleep(0.5)


def short():
    # A run shorter than the sampler's device scan period: its first look finds nothing in use; memory comes
    # into use after it, and the app ends at once (as a short PyTorch job on the H200 did).
    torch.cuda.init()
    fixture.wait_for_stats_call(0, fixture.stats_calls[0])
    fixture.set_stats(0, allocated=2 * MiB, reserved=4 * MiB, inactive_split=0, retries=0, ooms=0)


if __name__ == "__main__":
    if sys.argv[1] == "steps":
        steps(float(sys.argv[2]) if len(sys.argv) > 2 else 1.0)
    elif sys.argv[1] == "short":
        short()
    else:
        cadence()
