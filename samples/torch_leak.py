"""A PyTorch script with a known leak: one 256 MiB tensor kept alive in a global list, while everything else
is freed and the caching allocator's cache is emptied before exit. Run it under each allocator setting
(PYTORCH_CUDA_ALLOC_CONF unset, expandable_segments:True, backend:cudaMallocAsync)."""
import torch

LEAK_BYTES = 256 << 20
kept = []


def leak_here():
    kept.append(torch.empty(LEAK_BYTES, dtype=torch.uint8, device="cuda"))  # LEAK-SITE: leak_here


def churn():
    for i in range(20):
        x = torch.empty((i + 1) << 20, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x


churn()
leak_here()
torch.cuda.synchronize()
torch.cuda.empty_cache()
print(f"truth: leaked_bytes={LEAK_BYTES} leaked_allocations=1 failed_allocations=0", flush=True)
