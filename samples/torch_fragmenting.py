"""A PyTorch workload that fragments the caching allocator: tensors of 1-10 MiB allocated interleaved, every other
one freed, repeated, each round inside an NVTX range "round". Under the default allocator the freed tensors leave
free holes inside partly used blocks (PyTorch's "inactive split" bytes) that larger requests cannot use; under
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True segments grow in place and far less is split. Compare:

  gpumemtrace run -o default.db python samples/torch_fragmenting.py
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True gpumemtrace run -o expandable.db python samples/torch_fragmenting.py
  gpumemtrace diff default.db expandable.db
"""
import random

import torch

MiB = 1 << 20
ROUNDS = 12
PER_ROUND = 120

random.seed(7)
kept = []
for round_index in range(ROUNDS):
    torch.cuda.nvtx.range_push("round")
    fresh = [torch.empty(random.randint(1, 10) * MiB + random.randint(0, 511) * 1024, dtype=torch.uint8, device="cuda")
             for _ in range(PER_ROUND)]
    kept.extend(fresh[0::2])  # every other tensor survives: holes between the survivors
    del fresh
    # Requests a little larger than any hole: they cannot reuse the split blocks.
    big = [torch.empty(11 * MiB, dtype=torch.uint8, device="cuda") for _ in range(4)]
    del big
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
stats = torch.cuda.memory_stats()
print(f"torch: reserved={stats['reserved_bytes.all.current']} allocated={stats['allocated_bytes.all.current']} "
      f"requested={stats['requested_bytes.all.current']} "
      f"inactive_split_peak={stats['inactive_split_bytes.all.peak']} retries={stats['num_alloc_retries']}", flush=True)
