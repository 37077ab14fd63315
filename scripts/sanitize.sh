#!/usr/bin/env bash
# Builds gpumemtrace under sanitizers and runs the unit, end-to-end and reliability tests there:
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (any finding fails the test that saw it)
#   build-tsan/  ThreadSanitizer
# Usage: scripts/sanitize.sh [asan] [tsan]        (default: both; GMT_SANITIZE_JOBS sets ctest -j)
#
# The samples are CUDA programs built by nvcc without instrumentation, and the preload library and the
# simulated runtime are instrumented shared libraries loaded into them. ASan then needs its runtime loaded
# before libc (LD_PRELOAD=libasan.so; verify_asan_link_order=0 because the CLI puts libgpumemtrace.so in
# front of it). ThreadSanitizer cannot work that way: its runtime must start before any thread and see every
# synchronization of the process, and the uninstrumented app and simulated runtime hide theirs, so the
# preloaded e2e runs report races inside code TSan cannot see (docs/reliability.md). Under TSan this script
# runs the unit tests and the recorder tests that link the recorder objects directly (label unit).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
jobs=${GMT_SANITIZE_JOBS:-$(nproc)}
which=("$@")
((${#which[@]})) || which=(asan tsan)

configure_and_build() {  # dir flags
  local dir=$1 flags=$2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMT_FUZZ=OFF \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_C_FLAGS="$flags -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
}

status=0
for kind in "${which[@]}"; do
  start=$(date +%s)
  case $kind in
    asan)
      configure_and_build build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
      built=$(date +%s)
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
      # Unit tests: instrumented executables, leak checking on.
      ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit || status=1
      # The CLI runs uninstrumented apps with instrumented libraries preloaded: the ASan runtime goes first.
      # Leak checking off: the test runner (python) and the apps are not ours. ASan's own SEGV/BUS/FPE
      # handlers off: the reliability tests crash apps on purpose and check that they die of the signal
      # (ASan would print a report and exit 1); a real fault in our code still fails the test that sees it.
      LD_PRELOAD=$(g++ -print-file-name=libasan.so) \
        ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0 \
        ctest --test-dir build-asan --output-on-failure -j"$jobs" -L 'e2e|reliability' -LE 'unit|gpu|fuzz' || status=1
      ;;
    tsan)
      configure_and_build build-tsan "-fsanitize=thread"
      built=$(date +%s)
      TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L unit || status=1
      ;;
    *) echo "sanitize: unknown sanitizer '$kind' (asan, tsan)" >&2; exit 2 ;;
  esac
  end=$(date +%s)
  echo "sanitize: $kind: build $((built - start)) s, tests $((end - built)) s"
done
exit $status
