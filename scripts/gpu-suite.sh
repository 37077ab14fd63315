#!/usr/bin/env bash
# Run ON the GPU machine (device tool), from the repository root, with .gpu/ carried:
#   scripts/gpu-suite.sh
# Unpacks the carried Debian packages into a private prefix (never into /), builds gpumemtrace with the
# machine's own CUDA toolkit, runs every test (the gpu label included), and leaves logs in $OUT (or .gpu/out).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"
prefix=/tmp/gmt-prefix
rm -rf "$prefix" && mkdir -p "$prefix"
for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
libdir=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH

{
  echo "== machine"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.total --format=csv,noheader
  nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1
  echo "== commit $(git rev-parse --short HEAD 2>/dev/null || cat .gpu/commit 2>/dev/null || echo unknown)"
} 2>&1 | tee "$out/machine.txt"

build=/tmp/gmt-build
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix/usr" \
  >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -60; exit 1; }

ctest --test-dir "$build" --output-on-failure -j4 "$@" >"$out/ctest.log" 2>&1
status=$?
grep -E "^ *[0-9]+/[0-9]+ Test|tests passed|FIGURE" "$out/ctest.log" | grep -vE "Passed" | tail -40
grep -E "tests passed" "$out/ctest.log"
# The GPU suite's own verbose output, with its figures.
ctest --test-dir "$build" -L gpu -V > "$out/gpu-suite.log" 2>&1
grep -E "FIGURE|ok$|FAIL|ERROR|Ran |OK|SKIP" "$out/gpu-suite.log" | sed 's/^[0-9]*: //' | tail -40
# Side-by-side overhead on the real GPU (docs/benchmarks.md).
python3 bench/overhead.py "$build" 7 2>&1 | tee "$out/overhead.txt"
exit $status
