"""The PyTorch session of tests/gpu/test_gpu_wheel.py (`pytest --gpumemtrace` on the GPU): one test keeps a tensor
and fails its limit_gpu_leaks marker at that line (tensor level: PyTorch's allocator is tracked), one frees what it
made and passes, one peaks over its limit_gpu_peak."""
import pytest
import torch

KEPT = []


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_keeps_a_tensor():
    KEPT.append(torch.empty(16 << 20, dtype=torch.uint8, device="cuda"))  # LEAK-LINE


@pytest.mark.limit_gpu_leaks("1 MiB")
def test_frees_its_tensors():
    scratch = torch.ones(8 << 20, dtype=torch.uint8, device="cuda")
    assert int(scratch.sum()) == 8 << 20
    del scratch


@pytest.mark.limit_gpu_peak("32 MiB")
def test_peaks_over_its_limit():
    big = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")  # PEAK-LINE
    del big
