#!/usr/bin/env bash
# Run HERE (a machine with Debian's package registry and PyPI) before a GPU run: downloads the Debian packages that
# the GPU machine's image lacks into .gpu/debs/, and into .gpu/wheels/ PyPI's CUDA 12 runtime and CUPTI wheels
# (gpu.cuda12), pytest's wheels and this tree's own gpumemtrace wheel, built and repaired here (gpu.wheel; skip
# with GMT_NO_WHEEL=1). .gpu/ is ignored by git; the device tool carries it. The GPU machine has the CUDA toolkit,
# cmake, g++ and python3, but no sqlite3.h, libunwind or libdw (shared/FACTS.md), and no package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu/debs
cd .gpu/debs
packages=(libsqlite3-dev libsqlite3-0 libunwind-dev libunwind8 libdw-dev libdw1 libelf-dev libelf1
          zlib1g-dev liblzma-dev libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev)
apt-get download "${packages[@]}" >/dev/null
git -C ../.. describe --always --dirty > ../commit 2>/dev/null || true
# GMT_BASELINE=<rev>: also carry that commit's sources, so that gpu-suite.sh builds it beside this tree and the
# overhead benchmark compares the two profilers in the same interleaved rounds (`before:` columns).
rm -f ../baseline.tar ../baseline-commit
if [ -n "${GMT_BASELINE:-}" ]; then
  git -C ../.. archive --format=tar "$GMT_BASELINE" > ../baseline.tar
  git -C ../.. rev-parse --short "$GMT_BASELINE" > ../baseline-commit
  echo "gpu-prepare: baseline $(cat ../baseline-commit) in .gpu/baseline.tar"
fi
ls -1 *.deb | wc -l | xargs echo "gpu-prepare: debs in .gpu/debs:"
cd ../..
mkdir -p .gpu/wheels
python3 -m pip download -q --no-deps -d .gpu/wheels nvidia-cuda-runtime-cu12 nvidia-cuda-cupti-cu12
python3 -m pip download -q -d .gpu/wheels --only-binary=:all: pytest
if [ -z "${GMT_NO_WHEEL:-}" ]; then
  rm -f .gpu/wheels/gpumemtrace-*.whl
  GMT_WHEEL_DIR=build/dist-gpu GMT_WHEEL_BUILD_DIR=${GMT_WHEEL_BUILD_DIR:-build/wheel} scripts/build-wheel.sh >/dev/null
  cp build/dist-gpu/gpumemtrace-*.whl .gpu/wheels/
fi
ls -1 .gpu/wheels | xargs echo "gpu-prepare: wheels in .gpu/wheels:"
