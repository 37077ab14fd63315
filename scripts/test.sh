#!/usr/bin/env bash
# The test command: builds, then runs every test (unit, end-to-end under the simulated CUDA runtime; the GPU
# suite skips itself when there is no GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${GMT_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
