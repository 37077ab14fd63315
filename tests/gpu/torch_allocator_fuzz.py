"""Drives PyTorch's caching allocator with a random request stream for the what-if replay's fuzz (issue 37, 4d;
tests/gpu/test_gpu_whatif.py): sizes straddling every boundary of its rules (512 B, 1 MiB, 10 MiB, 2 MiB steps,
20 MiB, 128 and 512 MiB), three streams, frees in random order, some after record_stream on another stream, calls
of empty_cache(), and a per-process memory fraction so that out-of-memory errors are deterministic (the fraction is
checked before any CUDA call); each OutOfMemoryError is caught and the stream goes on. Run under each setting of the
grid (PYTORCH_CUDA_ALLOC_CONF), it prints what it did.
usage: torch_allocator_fuzz.py [--seed N] [--ops N] [--budget-mib N]
"""
import argparse
import random

import torch

MiB = 1 << 20
parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--ops", type=int, default=3000)
parser.add_argument("--budget-mib", type=int, default=2048)
args = parser.parse_args()
rng = random.Random(args.seed)

torch.cuda.init()
torch.cuda.set_per_process_memory_fraction(args.budget_mib * MiB / torch.cuda.mem_get_info()[1])
streams = [torch.cuda.current_stream(), torch.cuda.Stream(), torch.cuda.Stream()]
BOUNDARIES = [512, MiB, 10 * MiB, 2 * MiB, 20 * MiB, 128 * MiB, 512 * MiB]


def size():
    pick = rng.random()
    if pick < 0.5:
        base = rng.choice(BOUNDARIES)
        return max(1, base + rng.randint(-600, 600))
    if pick < 0.8:
        return rng.randint(1, 2 * MiB)
    return rng.randint(MiB, 96 * MiB)


live = []
counts = {"allocs": 0, "frees": 0, "ooms": 0, "empty_cache": 0, "record_stream": 0}
for _ in range(args.ops):
    action = rng.random()
    if action < 0.55 or not live:
        stream = rng.choice(streams)
        with torch.cuda.stream(stream):
            try:
                live.append((torch.empty(size(), dtype=torch.uint8, device="cuda"), stream))
                counts["allocs"] += 1
            except torch.cuda.OutOfMemoryError:
                counts["ooms"] += 1
    elif action < 0.97:
        tensor, stream = live.pop(rng.randrange(len(live)))
        if rng.random() < 0.05:
            other = rng.choice([s for s in streams if s != stream])
            tensor.record_stream(other)
            counts["record_stream"] += 1
        del tensor
        counts["frees"] += 1
    else:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        counts["empty_cache"] += 1
torch.cuda.synchronize()
stats = torch.cuda.memory_stats()
print(" ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
print(f"peak_reserved_bytes {stats['reserved_bytes.all.peak']}", flush=True)
del live
