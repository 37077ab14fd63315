#!/usr/bin/env bash
# Run ON the GPU machine (device tool), from the repository root, with .gpu/ carried: a before/after measurement of
# the profiler's cost per PyTorch step (bench/torch_step_ab.py), this tree against a baseline commit, on one machine
# one after the other. Prepare here with `GMT_BASELINE=<rev> scripts/gpu-prepare.sh`.
#   scripts/gpu-ab.sh [torch_step_ab.py options...]      e.g. --configs control,hooks,blocks,cuda --blocks 16
#   builds in /tmp/gmt-ab-after and /tmp/gmt-ab-before.
# Builds only what the benchmark runs (the CLI, the preload library and the in-process Python package) of both trees, side by side, then runs the
# benchmark with this tree's script against each build: after first, then before. GMT_AB_ROUNDS=N repeats the pair.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.gpu/out}
mkdir -p "$out"
prefix=/tmp/gmt-prefix
if [ ! -d "$prefix/usr" ]; then
  mkdir -p "$prefix"
  for deb in .gpu/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
[ -f .gpu/baseline.tar ] || { echo "gpu-ab: no .gpu/baseline.tar (GMT_BASELINE=<rev> scripts/gpu-prepare.sh)"; exit 2; }
if [ ! -d /tmp/gmt-base-src ]; then mkdir -p /tmp/gmt-base-src && tar -xf .gpu/baseline.tar -C /tmp/gmt-base-src; fi
build_targets() {  # source, build folder
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix/usr" >/dev/null &&
    cmake --build "$2" -j"$(($(nproc) / 2))" --target gpumemtrace gmt_preload gmt_python_package >/dev/null
}
start=$(date +%s)
build_targets . /tmp/gmt-ab-after >"$out/ab-build-after.log" 2>&1 &
build_targets /tmp/gmt-base-src /tmp/gmt-ab-before >"$out/ab-build-before.log" 2>&1 &
wait
for side in after before; do
  [ -x /tmp/gmt-ab-$side/bin/gpumemtrace ] || { echo "gpu-ab: the $side build failed"; tail -30 "$out/ab-build-$side.log"; exit 1; }
done
echo "== built both in $(($(date +%s) - start)) s; after: $(cat .gpu/commit 2>/dev/null), before: $(cat .gpu/baseline-commit)"
# GMT_AB_BUILD_ONLY=1: stop here, for a caller that runs each side with its own configurations (a configuration
# that only the new tree has, for instance).
[ -z "${GMT_AB_BUILD_ONLY:-}" ] || exit 0
nvidia-smi -L
for round in $(seq "${GMT_AB_ROUNDS:-1}"); do
  for side in after before; do
    echo "== $side, round $round"
    python3 bench/torch_step_ab.py /tmp/gmt-ab-$side "$@" 2>&1 | tee -a "$out/torch_step_ab-$side.txt"
  done
done
