"""TEST FIXTURE, not PyTorch: see ../README.md. Autograd's backward pass runs on a worker thread of the fake
allocator's library (fixture_backward), as PyTorch's engine runs it on its device threads: the gradient it allocates
there has no Python frames. The gradient is kept on the tensor (tensor.grad), as PyTorch keeps a leaf's."""


class _Gradient:
    """A block the worker thread allocated: freed when the tensor lets go of it (also at interpreter teardown, when
    nothing can be imported any more: the release function is kept)."""

    def __init__(self, address, size):
        import torch
        self.address = address
        self.size = size
        self._release = torch._c10_cuda().fixture_release

    def __del__(self):
        if self.address:
            self._release(self.address)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None, hold_ms=0):
    import torch
    for tensor in tensors if isinstance(tensors, (list, tuple)) else [tensors]:
        address = torch._c10_cuda().fixture_backward(tensor.size, hold_ms)
        if address == 0:
            raise torch.OutOfMemoryError(f"fixture: no block of {tensor.size} bytes left for a gradient")
        tensor.grad = _Gradient(address, tensor.size)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, hold_ms=0):
    import torch
    gradients = []
    for tensor in inputs if isinstance(inputs, (list, tuple)) else [inputs]:
        gradients.append(_Gradient(torch._c10_cuda().fixture_backward(tensor.size, hold_ms), tensor.size))
    return tuple(gradients)
