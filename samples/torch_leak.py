"""A PyTorch script with a known leak: one 256 MiB tensor whose reference count is raised once too often (the
way a buggy extension leaks), so it is never freed, not even at interpreter shutdown; everything else is
freed and the caching allocator's cache is emptied before exit. Run it under each allocator setting
(PYTORCH_CUDA_ALLOC_CONF unset, expandable_segments:True, backend:cudaMallocAsync)."""
import ctypes

import torch

LEAK_BYTES = 256 << 20


def leak_here():
    tensor = torch.empty(LEAK_BYTES, dtype=torch.uint8, device="cuda")  # LEAK-SITE: leak_here
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(tensor))  # one reference nobody will ever drop


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
