"""Autograd's backward calls, marked in the trace so that the tensors its worker threads allocate get a user line.

PyTorch runs a backward pass on its autograd engine's worker threads (one per device), which have no Python frames:
the gradients and backward activations they allocate show only libtorch's frames. Here torch.autograd.backward
(which Tensor.backward calls) and torch.autograd.grad are wrapped: on the calling thread, before and after the call,
one ctypes call to the preloaded library (gmt_autograd_call, recorder/framework_calls.h) records the call's begin,
with that thread's stack (its Python frames name the backward() line), and its end. The analyzer links what other
threads allocate meanwhile to that line (docs/analysis.md "Tensors of backward()"), or says "during backward()"
without a line when several calls ran at once. Nothing runs inside an allocator callback and the GIL is never
taken there: the wrapper runs on the app's own thread, where the app called backward().
"""
import ctypes
import functools
import itertools

from . import native

BACKWARD = 1  # torch.autograd.backward, Tensor.backward
GRAD = 2  # torch.autograd.grad

_calls = itertools.count(1)  # pairs a begin with its end; next() is atomic under the GIL


def _marked(original, api, mark):
    @functools.wraps(original)
    def call_marked(*args, **kwargs):
        call = next(_calls)
        mark(1, api, call)
        try:
            return original(*args, **kwargs)
        finally:
            mark(0, api, call)

    call_marked.__gpumemtrace_wrapped__ = True
    return call_marked


def on_torch_imported(torch):
    """watch.when_imported('torch', ...): wrap autograd's entry points once."""
    mark = native.function("gmt_autograd_call", None, [ctypes.c_int, ctypes.c_int, ctypes.c_uint64])
    autograd = getattr(torch, "autograd", None)
    if mark is None or autograd is None:
        return
    for name, api in (("backward", BACKWARD), ("grad", GRAD)):
        original = getattr(autograd, name, None)
        if original is None or getattr(original, "__gpumemtrace_wrapped__", False):
            continue
        setattr(autograd, name, _marked(original, api, mark))
