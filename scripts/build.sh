#!/usr/bin/env bash
# Configures and builds gpumemtrace into build/ (or $GMT_BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GMT_BUILD_DIR:-build}
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
# The tests and the CUDA programs explicitly: a wheel built into the same folder (scripts/build-wheel.sh with
# GMT_WHEEL_BUILD_DIR=build, as CI does to reuse the objects) turns both off in its cache.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON -DGMT_CUDA_PROGRAMS=ON "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
