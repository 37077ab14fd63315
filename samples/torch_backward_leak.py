"""A training loop whose gradients leak (issue 34, point 3): each step's backward() makes a fresh gradient for the
weight (set_to_none=True), on autograd's device thread, which has no Python frames; the loop keeps every one. The
report must link that leak to the backward() line. Prints what the checks compare against."""
import torch

STEPS = 20
model = torch.nn.Linear(1024, 1024, bias=False).cuda()
kept = []
for step in range(STEPS):
    x = torch.randn(64, 1024, device="cuda")
    loss = model(x).sum()
    loss.backward()  # BACKWARD-LINE
    kept.append(model.weight.grad)  # the gradient autograd made: kept, never freed
    model.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print(f"steps {STEPS}", flush=True)
print(f"gradient_bytes {model.weight.numel() * model.weight.element_size()}", flush=True)
