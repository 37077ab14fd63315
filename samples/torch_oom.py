"""A PyTorch out-of-memory error that the app catches: 1 GiB is held by a tensor, then one tensor larger than the
GPU is asked for. torch.cuda.OutOfMemoryError is raised and caught; the app goes on and exits normally.
`gpumemtrace report` shows a "PyTorch out of memory" section with the request, the allocator's figures and the
CUDA-level memory live at that moment, by call stack."""
import torch

held = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # HELD-SITE
total = torch.cuda.get_device_properties(0).total_memory
request = total + (1 << 30)
try:
    torch.empty(request, dtype=torch.uint8, device="cuda")
except torch.cuda.OutOfMemoryError:
    print(f"caught OutOfMemoryError; request_bytes={request}", flush=True)
torch.cuda.synchronize()
