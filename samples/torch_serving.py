"""A time-compressed PyTorch inference service for `run --aggregate` (issue 35): a small decoder-style model served
request after request for DURATION seconds, each request of a random length (an NVTX range "request"), and a slow
leak: one KV-cache buffer in LEAK_EVERY requests is kept in a list forever (a cache never evicted). Prints what it
served and what it kept, so a report can be checked against it:

    python samples/torch_serving.py [DURATION_S=60] [LEAK_EVERY=500] [TICK_S=0]

    served: requests=N seconds=S requests_per_s=R
    truth: kept_buffers=K kept_bytes=B leak_line=L

With TICK_S > 0 it also prints `tick: monotonic=T requests=N` every TICK_S seconds (T is CLOCK_MONOTONIC, which
every process of the machine shares), so that a benchmark can count the requests served in any time window of one
run (tests/gpu/test_gpu_top.py: top switched on and off while one service runs).
"""
import inspect
import random
import sys
import time

import torch

DURATION_S = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
LEAK_EVERY = int(sys.argv[2]) if len(sys.argv) > 2 else 500
TICK_S = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
D_MODEL = 1024
LAYERS = 4
KV_BYTES_PER_TOKEN = 2 * D_MODEL * 2  # keys and values, bf16

kept = []  # the leak: KV buffers of finished requests that nobody evicts


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.Linear(D_MODEL, 3 * D_MODEL)
        self.out = torch.nn.Linear(D_MODEL, D_MODEL)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(D_MODEL, 4 * D_MODEL), torch.nn.GELU(),
                                       torch.nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x):
        q, k, v = self.attn(x).chunk(3, dim=-1)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a)
        return x + self.mlp(x)


def keep_kv(tokens):
    # Exactly tokens * KV_BYTES_PER_TOKEN bytes (a multiple of 512: the caching allocator's block is the same size).
    buffer = torch.empty(tokens * KV_BYTES_PER_TOKEN, dtype=torch.uint8, device="cuda")  # LEAK-SITE: keep_kv
    kept.append(buffer)
    return buffer.numel()


def main():
    torch.manual_seed(0)
    rng = random.Random(0)
    model = torch.nn.Sequential(*[Block() for _ in range(LAYERS)]).cuda().to(torch.bfloat16).eval()
    leak_line = inspect.getsourcelines(keep_kv)[1] + 2
    kept_bytes = 0
    served = 0
    start = time.monotonic()
    next_tick = start
    with torch.inference_mode():
        while True:
            now = time.monotonic()
            if now - start >= DURATION_S:
                break
            if TICK_S > 0 and now >= next_tick:
                print(f"tick: monotonic={now:.4f} requests={served}", flush=True)
                next_tick += TICK_S
            torch.cuda.nvtx.range_push("request")
            tokens = rng.choice((64, 128, 256, 512)) * rng.randint(1, 4)
            x = torch.randn(1, tokens, D_MODEL, device="cuda", dtype=torch.bfloat16)
            y = model(x)
            y.sum().item()  # the response: waits for the GPU
            served += 1
            if served % LEAK_EVERY == 0:
                kept_bytes += keep_kv(tokens)
            del x, y
            torch.cuda.nvtx.range_pop()
    elapsed = time.monotonic() - start
    print(f"served: requests={served} seconds={elapsed:.1f} requests_per_s={served / elapsed:.1f}", flush=True)
    print(f"truth: kept_buffers={len(kept)} kept_bytes={kept_bytes} leak_line={leak_line}", flush=True)


if __name__ == "__main__":
    main()
