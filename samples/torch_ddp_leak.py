"""A two-process PyTorch DDP job with a known per-rank leak, for the merged report on real GPUs.

    torchrun --standalone --nproc_per_node=2 --no-python \
        gpumemtrace run -o 'trace.%r.db' -- python samples/torch_ddp_leak.py

Each rank trains a small model with DistributedDataParallel (gradients all-reduced by NCCL) and all-reduces
one more tensor per step. Rank GMT_LEAK_RANK (default 1) keeps a 64 MiB tensor every step with one reference
nobody drops (as a buggy extension would), so it is never freed, not even at shutdown; everything else is
released and the caching allocator's cache is emptied before exit. The leaking rank prints its truth line.
"""
import ctypes
import os

import torch
import torch.distributed as dist

STEPS = 20
# Larger than any block the step frees (the 16 MiB weight gradients, dropped by zero_grad each step): a kept
# tensor of a gradient's size was served from that gradient's freed block, in a segment the backward pass had
# allocated, and the leak showed under the gradient's stack.
KEEP_BYTES = 64 << 20
LEAK_RANK = int(os.environ.get("GMT_LEAK_RANK", "1"))


def keep_history(kept):
    """Keeps one more tensor; returns how many segments PyTorch's caching allocator got from cudaMalloc for it: 1,
    or 0 when a block freed earlier served it (whether one is free then depends on when NCCL's stream released
    it: timing)."""
    segments_before = torch.cuda.memory_stats()["segment.all.allocated"]
    tensor = torch.ones(KEEP_BYTES, dtype=torch.uint8, device="cuda")  # LEAK-SITE: keep_history
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(tensor))
    kept.append(tensor)
    return torch.cuda.memory_stats()["segment.all.allocated"] - segments_before


def main():
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    kept = []
    fresh_segments = 0
    for _ in range(STEPS):
        x = torch.randn(256, 1024, device=device)
        ddp(x).square().mean().backward()  # DDP all-reduces the gradients with NCCL
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        signal = torch.ones(1 << 20, device=device)
        dist.all_reduce(signal)
        assert signal[0].item() == dist.get_world_size()
        if rank == LEAK_RANK:
            fresh_segments += keep_history(kept)
    torch.cuda.synchronize()
    dist.barrier()
    del ddp, model, optimizer, x, signal
    kept.clear()  # the extra references keep the tensors alive
    dist.destroy_process_group()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    leaked = STEPS * KEEP_BYTES if rank == LEAK_RANK else 0
    print(f"rank {rank}: truth: leaked_bytes={leaked} leaked_allocations={STEPS if leaked else 0} "
          "failed_allocations=0", flush=True)
    if rank == LEAK_RANK:
        print(f"rank {rank}: kept tensors in fresh segments: {fresh_segments}", flush=True)


if __name__ == "__main__":
    main()
