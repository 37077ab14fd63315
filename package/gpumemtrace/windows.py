"""What the pytest plugin reads from `report --format json` for one test's window (kept apart from pytest_plugin.py,
which needs pytest, so that it can be checked on its own)."""


def window_peak(window):
    """The most GPU memory a window's allocations held at once, and the peaks' stacks: at tensor level where PyTorch's
    blocks are recorded, like limit_gpu_leaks. The report's own peak is the device's, at CUDA level: new memory the
    caching allocator reserved in the window, which depends on what earlier tests left in its cache (a test whose
    64 MiB tensor reuses a segment cached by the test before it reserves nothing). Where CUDA memory outside the
    cache was allocated too, the app's peak on a device (its blocks and that memory together) is taken if larger."""
    blocks = window.get("tensor_blocks")
    if not blocks:
        return window["totals"]["peak_bytes"], window.get("peak_stacks", [])
    peak, stacks = blocks["totals"]["peak_bytes"], blocks.get("peak_stacks", [])
    for device_peak in window.get("peak_stacks", []):
        if (device_peak.get("held_bytes") or 0) > peak:
            peak, stacks = device_peak["held_bytes"], [device_peak]
    return peak, stacks
