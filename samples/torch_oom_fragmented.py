"""A fragmentation out-of-memory error inside PyTorch's caching allocator (issue 34, point 1): a tensor takes most of
the GPU, then 128 tensors of 7 MiB fill 64 cached segments of 20 MiB (two each), and every other one is freed, so
each segment keeps 13 MiB free but split around a live tensor. A 340 MiB request fits no free block and cudaMalloc
cannot give it a new segment either (about 200 MiB of the device is free): PyTorch tries cudaMalloc, frees what it can
of its cache (nothing: every segment is split), tries again, and raises OutOfMemoryError, which the app catches.
One failed request, with its two failed cudaMallocs as evidence. Everything is freed before exit: no leak. Prints
what the checks compare against."""
import torch

MiB = 1 << 20
REQUEST = 340 * MiB
SEGMENTS = 64

torch.cuda.init()
free, _ = torch.cuda.mem_get_info()
# A multiple of PyTorch's 2 MiB rounding: the hog's segment is all block, no free bytes in it.
hog = torch.empty((free - (SEGMENTS * 20 + 200) * MiB) // (2 * MiB) * (2 * MiB), dtype=torch.uint8, device="cuda")
blocks = [torch.empty(7 * MiB, dtype=torch.uint8, device="cuda") for _ in range(2 * SEGMENTS)]
kept = blocks[0::2]
del blocks
stats = torch.cuda.memory_stats()
print(f"cached_free_bytes {stats['reserved_bytes.all.current'] - stats['allocated_bytes.all.current']}", flush=True)
print(f"segments {stats['segment.all.current']}", flush=True)
print(f"device_free_bytes {torch.cuda.mem_get_info()[0]}", flush=True)
try:
    torch.empty(REQUEST, dtype=torch.uint8, device="cuda")  # FRAGMENTED-OOM
except torch.cuda.OutOfMemoryError:
    print("caught OutOfMemoryError", flush=True)
del kept, hog
torch.cuda.synchronize()
print(f"request_bytes {REQUEST}", flush=True)
