"""TEST FIXTURE, not PyTorch: the out-of-memory observers."""
_oom_observers = []


def _cuda_attach_out_of_memory_observer(callback):
    _oom_observers.append(callback)
