"""A PyTorch training loop that leaks the way real ones do: its metric logging keeps a graph-attached tensor every
step (history.append(loss) instead of loss.item()), and with it that step's activations. At the CUDA level the
caching allocator only grows its segments, from whichever allocation finds no free block; at the block level
(PyTorch's tensors, recorded by default) `gpumemtrace run` names the line that keeps the tensors (BLOCK-LEAK-SITE).
`--fixed` logs loss.item(): no leak. Prints PyTorch's own count of the tensor blocks it allocated.

usage: torch_training_leak.py [--fixed] [--steps N]
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true", help="log loss.item(): nothing is kept")
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 2048, device="cuda")
history = []


def train_step():
    loss = model(x).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if args.fixed:
        history.append(model(x).square().mean().item())
    else:
        history.append(model(x).square().mean())  # BLOCK-LEAK-SITE: keeps the graph and its activations


for step in range(args.steps):
    torch.cuda.nvtx.range_push("train step")
    train_step()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print(f"steps {len(history)} fixed {args.fixed}", flush=True)
print(f"torch_allocations {torch.cuda.memory_stats()['allocation.all.allocated']}", flush=True)
