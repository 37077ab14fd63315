"""TEST FIXTURE, not PyTorch: the allocator calls torch.cuda.memory has, which the in-process package records
(schema v10, for `gpumemtrace whatif`). The fake allocator has no cache and no settings: they change nothing."""
calls = []


def empty_cache():
    calls.append("empty_cache")


def _set_allocator_settings(env):
    calls.append(f"settings {env}")


def set_per_process_memory_fraction(fraction, device=None):
    calls.append(f"fraction {fraction}")
