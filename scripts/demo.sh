#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, profile the leaky sample and print the
# report. Without a GPU it uses the simulated CUDA runtime, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
simulate=()
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "demo: no NVIDIA GPU found: profiling under the SIMULATED CUDA runtime (kernels are not run)"
  simulate=(--simulate)
fi
trace=build/demo-leaky.db
build/bin/gpumemtrace run "${simulate[@]}" --force -o "$trace" -- build/samples/leaky
echo
build/bin/gpumemtrace report "$trace"
