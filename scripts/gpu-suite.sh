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
  # .gpu/commit first: gpu-prepare.sh writes it from the tree being copied; the copy's own .git may be older.
  echo "== commit $(cat .gpu/commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
} 2>&1 | tee "$out/machine.txt"

build=/tmp/gmt-build
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_PREFIX_PATH="$prefix/usr" \
  >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error" -A3 "$out/build.log" | head -60; exit 1; }
# A baseline commit carried by gpu-prepare.sh (GMT_BASELINE=<rev>): built the same way, for the `before:` columns
# of the overhead benchmark. Kept between calls on a warm machine, like the main build.
baseline=/tmp/gmt-base
baseline_args=()
if [ -f .gpu/baseline.tar ]; then
  if [ ! -x "$baseline/bin/gpumemtrace" ]; then
    rm -rf /tmp/gmt-base-src && mkdir -p /tmp/gmt-base-src && tar -xf .gpu/baseline.tar -C /tmp/gmt-base-src
    { cmake -S /tmp/gmt-base-src -B "$baseline" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DCMAKE_PREFIX_PATH="$prefix/usr" && cmake --build "$baseline" -j"$(nproc)"; } >"$out/baseline-build.log" 2>&1 ||
      { echo "baseline build failed:"; tail -30 "$out/baseline-build.log"; }
  fi
  [ -x "$baseline/bin/gpumemtrace" ] && baseline_args=(--baseline "$baseline") &&
    echo "== baseline $(cat .gpu/baseline-commit 2>/dev/null) built in $baseline" | tee -a "$out/machine.txt"
fi

status=0
if [ -n "${GMT_GPU_TESTS:-}" ]; then
  # Only the GPU suites whose names match (e.g. GMT_GPU_TESTS='graphs|torch'): a quick check of one change.
  ctest --test-dir "$build" --output-on-failure -L gpu -R "$GMT_GPU_TESTS" -V -j2 >"$out/gpu-suite.log" 2>&1 || status=1
  grep -E "FIGURE|ok$|FAIL|ERROR|Error|Ran |^[0-9]+: OK|SKIP|tests passed" "$out/gpu-suite.log" | sed 's/^[0-9]*: //' | tail -80
elif [ -z "${GMT_ONLY_BENCH:-}" ]; then
  # Everything but the GPU suite first (quick), then the GPU suite once, verbosely, with its figures.
  ctest --test-dir "$build" --output-on-failure -j8 -LE gpu >"$out/ctest.log" 2>&1
  status=$?
  grep -E "tests passed|Failed|\*\*\*" "$out/ctest.log" | tail -20
  ctest --test-dir "$build" --output-on-failure -L gpu -V -j2 >"$out/gpu-suite.log" 2>&1 || status=1
  grep -E "FIGURE|ok$|FAIL|ERROR|Error|Ran |^[0-9]+: OK|SKIP|tests passed" "$out/gpu-suite.log" | sed 's/^[0-9]*: //' | tail -60
fi
# The benchmarks (docs/benchmarks.md). A device call is limited to 10 minutes: on a warm machine, run the tests
# in one call and GMT_ONLY_BENCH=1 scripts/gpu-suite.sh in the next (the build is reused). GMT_BENCHES picks
# which of them run (default: all five; pairs_ab on request); GMT_SKIP_BENCH=1 runs none.
benches=" ${GMT_BENCHES:-overhead torch_step torch_step_ab torch_blocks launch_cost} "
bench_wanted() { [ -z "${GMT_SKIP_BENCH:-}" ] && [[ "$benches" == *" $1 "* ]]; }
# Side-by-side overhead on the real GPU.
# GMT_OVERHEAD_ARGS replaces --with-sanitizer (e.g. --variants hooks,cupti); a carried baseline adds its columns.
# shellcheck disable=SC2086
bench_wanted overhead && python3 bench/overhead.py "$build" "${GMT_OVERHEAD_ROUNDS:-5}" ${GMT_OVERHEAD_ARGS:---with-sanitizer} \
  "${baseline_args[@]}" 2>&1 | tee "$out/overhead.txt"
# A real PyTorch training and inference step, raw vs profiled vs PyTorch's own recorder (target: 0.5%).
bench_wanted torch_step && python3 bench/torch_step.py "$build" "${GMT_TORCH_ROUNDS:-5}" ${GMT_TORCH_ARGS:-} 2>&1 | tee "$out/torch_step.txt"
# The same step with recording switched on and off inside one process (the figure for the 0.5% target).
bench_wanted torch_step_ab && python3 bench/torch_step_ab.py "$build" ${GMT_TORCH_AB_ARGS:-} 2>&1 | tee "$out/torch_step_ab.txt"
# The cost per allocation+free pair inside one process under each backend, with a carried baseline's `before:`
# columns from the same rounds (not in the default list: GMT_BENCHES=pairs_ab).
bench_wanted pairs_ab && python3 bench/pairs_ab.py "$build" --backends hooks,cupti "${baseline_args[@]}" 2>&1 |
  tee "$out/pairs_ab.txt"
# PyTorch's tensor blocks: their cost per tensor inside one process, and the sustained rate with nothing dropped.
bench_wanted torch_blocks && python3 bench/torch_blocks.py "$build" 2>&1 | tee "$out/torch_blocks.txt"
# What each backend adds to the calls that are not allocations (kernel launches, event records): the cupti backend's
# cost per step is there, if anywhere (issue 33, part 4).
bench_wanted launch_cost && python3 bench/launch_cost.py "$build" 2>&1 | tee "$out/launch_cost.txt"
# CPU-side figures on this idle host, the writer pinned to two cores like the build machine (GMT_CPU_BENCH=1).
if [ -n "${GMT_CPU_BENCH:-}" ]; then
  taskset -c 0,1 python3 bench/trace_throughput.py "$build" --rounds 3 2>&1 | tee "$out/trace_throughput.txt"
  taskset -c 0,1 python3 bench/report_speed.py "$build" --millions 1 10 50 --rounds 1 2>&1 | tee "$out/report_speed.txt"
  taskset -c 0,1 python3 bench/hook_cost.py "$build" --rounds 5 "${baseline_args[@]}" 2>&1 | tee "$out/hook_cost.txt"
fi
exit $status
