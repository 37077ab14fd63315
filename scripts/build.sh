#!/usr/bin/env bash
# Configures and builds gpumemtrace into build/ (or $GMT_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GMT_BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
