"""PyTorch's CUDA graphs (torch.cuda.graph) in each capture error mode: a few operations captured on a side stream,
replayed on new inputs, their results printed exactly (float.hex), so that a run under `gpumemtrace run` can be
compared with a run alone, byte for byte. With PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync the allocations made
inside the capture become graph memory nodes; with the native allocator they come from the graph's private pool.

usage: torch_graph.py [--replays N]
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--replays", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(0)
static_x = torch.randn(512, 512, device="cuda")
weights = torch.randn(512, device="cuda")


def step(x):
    y = (x * weights).relu() + 1.0  # temporaries allocated inside the capture
    return (y * y).sum(dim=1)


for mode in ("global", "thread_local", "relaxed"):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as PyTorch asks
        for _ in range(3):
            step(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=mode):
        static_out = step(static_x)
    sums = []
    for replay in range(args.replays):
        static_x.copy_(torch.full((512, 512), 0.01 * (replay + 1), device="cuda") * torch.arange(512, device="cuda"))
        graph.replay()
        sums.append(float(static_out.sum()).hex())
    expected = float(step(static_x).sum()).hex()  # the same computation eagerly, on the last input
    print(mode, "replays", " ".join(sums), "eager", expected, "same" if sums[-1] == expected else "DIFFERENT")
    del graph, static_out
torch.cuda.synchronize()
print("allocator", torch.cuda.get_allocator_backend())
