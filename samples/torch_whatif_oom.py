"""An out-of-memory error that another allocator setting avoids (issue 37, `gpumemtrace whatif`). PyTorch may reserve
--budget-mib (a per-process memory fraction, so the OOM does not depend on what else the GPU holds): eight 100 MiB
tensors are made and freed (eight cached 100 MiB segments), then eight 60 MiB tensors are kept, each taking one of
those segments and leaving 40 MiB of it free but split off. A 300 MiB request then fits no free block, and a new
segment would pass the budget: OutOfMemoryError (caught), with 320 MiB free in the cache.
  - expandable_segments:True: the 100 MiB tensors tile one growing segment; the 60 MiB ones tile its start and
    leave 320 MiB in one piece: the 300 MiB request fits.
  - max_split_size_mb:64: the 100 MiB segments are oversize, never split for a smaller request, and given back
    when a new segment does not fit: no OOM either.
Prints what the checks compare against, one "key value" per line.
usage: torch_whatif_oom.py [--budget-mib N]
"""
import argparse

import torch

MiB = 1 << 20
parser = argparse.ArgumentParser()
parser.add_argument("--budget-mib", type=int, default=1024)
args = parser.parse_args()

torch.cuda.init()
total = torch.cuda.mem_get_info()[1]
torch.cuda.set_per_process_memory_fraction(args.budget_mib * MiB / total)
big = [torch.empty(100 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]
del big
kept = [torch.empty(60 * MiB, dtype=torch.uint8, device="cuda") for _ in range(8)]
outcome = "no_oom"
try:
    wide = torch.empty(300 * MiB, dtype=torch.uint8, device="cuda")  # WHATIF-OOM
    del wide
except torch.cuda.OutOfMemoryError:
    outcome = "oom"
stats = torch.cuda.memory_stats()
print(f"outcome {outcome}", flush=True)
print(f"peak_reserved_bytes {stats['reserved_bytes.all.peak']}", flush=True)
print(f"ooms {stats['num_ooms']}", flush=True)
del kept
