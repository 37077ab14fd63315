#!/usr/bin/env bash
# A virtualenv with torch from PyPI, for tests/html/test_memory_viz_torch.py: PyTorch's own reader of memory snapshots
# (torch.cuda._memory_viz) opens the pickles of `report --format memory-viz`. Nothing of gpumemtrace needs torch.
#
# Where: $GMT_TORCH_VENV, else /opt/gpumemtrace-torch-venv. Nothing is done when its torch already imports.
# PyPI's torch for Linux x86-64 is the CUDA build: its import needs the nvidia-* wheels it depends on, so they come
# too (torch 2.15.0, about 4 GB; on the 2-core build machine on 2026-12-06, while others built: 8 min 7 s with an
# empty pip cache, 6 min 36 s with the wheels in pip's cache; `--no-deps` leaves `import torch` failing on
# libcufile.so.0). GMT_SKIP_TORCH_VENV=1 skips it (the test then reports itself skipped).
set -euo pipefail
venv=${GMT_TORCH_VENV:-/opt/gpumemtrace-torch-venv}
if [ "${GMT_SKIP_TORCH_VENV:-0}" = 1 ]; then
  echo "install-torch-venv: skipped (GMT_SKIP_TORCH_VENV=1)"
  exit 0
fi
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch.cuda._memory_viz" 2>/dev/null; then
  exit 0
fi
echo "install-torch-venv: installing torch from PyPI into $venv (about 4 GB, several minutes)"
python3 -m venv "$venv"
start=$(date +%s)
"$venv/bin/python" -m pip install -q --disable-pip-version-check torch
echo "install-torch-venv: done in $(( $(date +%s) - start )) s"
"$venv/bin/python" -c "import torch.cuda._memory_viz"
