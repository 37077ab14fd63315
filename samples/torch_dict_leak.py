"""A PyTorch service that leaks the way caches do: each request (NVTX range "request") computes on temporaries, and
one request in ten keeps a variable-sized tensor in a dict that is never cleared (DICT-KEEP). The weights
(WEIGHTS) are alive at exit too, on purpose. At the CUDA level only PyTorch's segments show; at the block level
`gpumemtrace run` names the dict line with exactly the kept bytes, and PyTorch's segments are "cached at exit".
`--oom` then fragments PyTorch's cache (one 4 MiB tensor of every five kept in its 20 MiB segments), caps the
process's memory at what is reserved, and asks for a block larger than every free hole: PyTorch raises
torch.cuda.OutOfMemoryError with more than the request free in its cache (caught). Prints what the checks compare
against, one "key value" per line.

usage: torch_dict_leak.py [--requests N] [--oom]
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--requests", type=int, default=200)
parser.add_argument("--oom", action="store_true", help="end in a caught OutOfMemoryError inside PyTorch's cache")
args = parser.parse_args()

MiB = 1 << 20
torch.manual_seed(0)
weights = torch.randn(1024, 1024, device="cuda")  # WEIGHTS: 4 MiB alive at exit
cache = {}


def kept_size(request):
    return (1 + request % 7) * MiB + 512 * (request % 13)  # multiples of 512: a block is exactly the tensor


def handle(request):
    x = torch.randn(256, 1024, device="cuda")
    y = (x * weights[: x.shape[0]]).relu_() + 1.0
    if request % 10 == 0:
        cache[request] = torch.empty(kept_size(request), dtype=torch.uint8, device="cuda")  # DICT-KEEP
    return float(y.sum())


for request in range(args.requests):
    torch.cuda.nvtx.range_push("request")
    handle(request)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("requests", args.requests)
print("kept_tensors", len(cache))
print("kept_bytes", sum(t.nbytes for t in cache.values()))
print("weights_bytes", weights.nbytes)


def free_space():
    """PyTorch's own account of its cache: free bytes in its segments, the largest free block, and the unused tails
    of allocated blocks (a block handed out whole is larger than the request: PyTorch does not split off a
    remainder of 1 MiB or less, and rounds requests to 512 B). Its trace tracker reports the requested size only,
    so in the trace's layout a tail is free space: the trace's free bytes are free + tails."""
    free, largest, tails = 0, 0, 0
    for segment in torch.cuda.memory_snapshot():
        for block in segment["blocks"]:
            if block["state"] == "inactive":
                free += block["size"]
                largest = max(largest, block["size"])
            elif block["state"] == "active_allocated":
                tails += block["size"] - block["requested_size"]
    return free, largest, tails


if args.oom:
    torch.cuda.empty_cache()  # no wholly free segment left for PyTorch to release and retry with
    pieces = [torch.empty(4 * MiB, dtype=torch.uint8, device="cuda") for _ in range(5 * 20)]
    held = pieces[2::5]  # the middle one of each 20 MiB segment: two 8 MiB holes around it
    del pieces
    # Some pieces filled holes of older segments, so a new segment may hold no kept piece: release those, or
    # PyTorch frees them on the failed request, retries under the cap, and succeeds (seen on the H200, 7a6657f).
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + 6 * MiB) / total)
    request_bytes = 24 * MiB  # larger than every hole (a 20 MiB segment holds at most 20 MiB free)
    try:
        torch.empty(request_bytes, dtype=torch.uint8, device="cuda")  # OOM-REQUEST
        print("oom raised", False)
    except torch.cuda.OutOfMemoryError:
        free, largest, tails = free_space()
        print("oom raised", True)
        print("oom_request", request_bytes)
        print("oom_cached_free", free)
        print("oom_largest_free", largest)
        print("oom_block_tails", tails)
    torch.cuda.set_per_process_memory_fraction(1.0)
    del held
torch.cuda.synchronize()
print("reserved_at_exit", torch.cuda.memory_reserved())
print("allocated_at_exit", torch.cuda.memory_allocated())
