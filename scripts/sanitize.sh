#!/usr/bin/env bash
# Builds gpumemtrace under sanitizers and runs the tests there (docs/reliability.md, "Sanitizers"):
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer: unit tests (leak checking on), then the
#                e2e and reliability tests with the instrumented preload library in uninstrumented apps
#   build-tsan/  ThreadSanitizer: unit tests and the recorder tests that link the recorder objects directly,
#                then one preloaded run of 16 threads without stacks
# Usage: scripts/sanitize.sh [asan] [tsan]        (default: both; GMT_SANITIZE_JOBS sets ctest -j)
# Any sanitizer finding fails the test that saw it (halt_on_error, -fno-sanitize-recover).
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

# Runs a sample with the build's preload library and simulated runtime, the sanitizer runtime first.
preloaded() {  # dir runtime_library command...
  local dir=$1 runtime=$2
  shift 2
  LD_PRELOAD="$runtime:$PWD/$dir/lib/gpumemtrace/libgpumemtrace.so" LD_LIBRARY_PATH="$PWD/$dir/lib/gpumemtrace/sim" \
    GMT_SIM_QUIET=1 GMT_BACKEND=runtime GMT_SIMULATED=1 "$@"
}

status=0
for kind in "${which[@]}"; do
  start=$(date +%s)
  case $kind in
    asan)
      configure_and_build build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
      built=$(date +%s)
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
      ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j"$jobs" -L unit || status=1
      # The apps are uninstrumented (nvcc, python) and load instrumented libraries: the ASan runtime goes
      # first in LD_PRELOAD (verify_asan_link_order=0: the CLI puts libgpumemtrace.so in front of it). Leak
      # checking off: the test runner and the apps are not ours. ASan's SEGV/BUS/FPE handlers off: the
      # reliability tests crash apps on purpose and check that they die of the signal (ASan would report and
      # exit 1); a real fault in our code still fails the test that sees it.
      asan_runtime=$(g++ -print-file-name=libasan.so)
      export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0
      trace=$(mktemp -u /tmp/gmt-asan-probe-XXXXXX.db)
      if GMT_OUTPUT=$trace preloaded build-asan "$asan_runtime" build-asan/samples/threaded 1 10 >/dev/null; then
        LD_PRELOAD=$asan_runtime \
          ctest --test-dir build-asan --output-on-failure -j"$jobs" -L 'e2e|reliability' -LE 'unit|gpu|fuzz' || status=1
      else
        echo "sanitize: asan: the preloaded library does not start under ASan: e2e and reliability tests not run" >&2
        status=1
      fi
      rm -f "$trace" "$trace-wal" "$trace-shm"
      unset ASAN_OPTIONS UBSAN_OPTIONS
      ;;
    tsan)
      configure_and_build build-tsan "-fsanitize=thread"
      built=$(date +%s)
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      ctest --test-dir build-tsan --output-on-failure -j"$jobs" -L unit || status=1
      # Preloaded, TSan sees only our side of the app's synchronization, and GCC 12's TSan crashes when a
      # thread that took a libunwind stack exits (libunwind frees its per-thread cache after TSan finished
      # the thread): so one run, 16 threads, no stacks, not through the test suite.
      tsan_runtime=$(g++ -print-file-name=libtsan.so)
      trace=$(mktemp -u /tmp/gmt-tsan-XXXXXX.db)
      if GMT_OUTPUT=$trace.probe GMT_NO_STACKS=1 preloaded build-tsan "$tsan_runtime" build-tsan/samples/threaded 1 10 >/dev/null 2>&1; then
        if GMT_OUTPUT=$trace GMT_NO_STACKS=1 preloaded build-tsan "$tsan_runtime" build-tsan/samples/threaded 16 20000 \
             >/tmp/gmt-tsan-threads.log 2>&1 &&
           build-tsan/bin/gpumemtrace report --format json "$trace" 2>/dev/null |
             python3 -c 'import json, sys; t = json.load(sys.stdin)["totals"]; sys.exit(t["allocations"] != 320016 or t["frees"] != 320000)'; then
          echo "sanitize: tsan: 16 threads x 20000 pairs preloaded: clean, counts exact"
        else
          echo "sanitize: tsan: 16 threads preloaded: FAILED (see /tmp/gmt-tsan-threads.log)" >&2
          status=1
        fi
      else
        echo "sanitize: tsan: SKIPPED the preloaded run: the preload library does not start under TSan" >&2
      fi
      rm -f "$trace" "$trace-wal" "$trace-shm" "$trace.probe" "$trace.probe-wal" "$trace.probe-shm"
      unset TSAN_OPTIONS
      ;;
    *) echo "sanitize: unknown sanitizer '$kind' (asan, tsan)" >&2; exit 2 ;;
  esac
  end=$(date +%s)
  echo "sanitize: $kind: build $((built - start)) s, tests $((end - built)) s"
done
exit $status
