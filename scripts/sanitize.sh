#!/usr/bin/env bash
# Builds gpumemtrace under sanitizers and runs the tests there (docs/reliability.md, "Sanitizers").
#
#   scripts/sanitize.sh [asan] [tsan]              the whole suite (about 40 minutes on 2 cores):
#     build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer: unit tests (leak checking on), then the
#                  e2e and reliability tests with the instrumented preload library in uninstrumented apps
#     build-tsan/  ThreadSanitizer: unit tests and the recorder tests that link the recorder objects directly,
#                  then one preloaded run of 16 threads without stacks
#   scripts/sanitize.sh --in-process [asan] [tsan]  what runs inside the profiled process (the CI default,
#     scripts/test.sh): only the preload library (recorder, interpose, cupti, nvtx, schema), the simulated
#     runtime and the test programs are built instrumented, into build-asan-inproc/ and build-tsan-inproc/;
#     the CLI and the samples are the regular build's (${GMT_BUILD_DIR:-build}, built first), copied in: the
#     build layout is relative, so that CLI preloads the instrumented library. Then the recorder and NVTX unit
#     tests, the reliability tests and the e2e tests (not test_install) under ASan+UBSan, and the recorder
#     tests plus the preloaded 16-thread run under TSan. The CLI and the analysis (the report path) run under
#     ASan+UBSan in the fuzzers of the regular build instead.
# GMT_SANITIZE_JOBS sets ctest -j. Any sanitizer finding fails the test that saw it (halt_on_error,
# -fno-sanitize-recover).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
jobs=${GMT_SANITIZE_JOBS:-$(nproc)}
in_process=0
if [ "${1:-}" = --in-process ]; then
  in_process=1
  shift
fi
which=("$@")
((${#which[@]})) || which=(asan tsan)
regular=${GMT_BUILD_DIR:-build}
asan_dir=build-asan
tsan_dir=build-tsan
if ((in_process)); then
  asan_dir=build-asan-inproc
  tsan_dir=build-tsan-inproc
  if [ ! -x "$regular/bin/gpumemtrace" ]; then
    echo "sanitize: --in-process needs the regular build in $regular (scripts/build.sh)" >&2
    exit 2
  fi
fi
# What runs inside the app, and the programs the in-process tests start (the simulated runtime included).
in_process_targets=(gmt_preload gmt_simcudart gmt_recorder_stress gmt_recorder_order gmt_fork_while_writing gmt_process_models
                    gmt_library_lifetime_app gmt_python_package gmt_test_fake_torch_nvtx ipc_share
                    gmt_test_fake_free_threaded gmt_test_fake_c10_cuda gmt_test_fake_c10
                    gmt_test_tracker_fixture_files gmt_exit_paths gmt_damaged_traces gmt_test_nvtx_mem_odd
                    gmt_stack_memo_places)

configure_and_build() {  # dir flags [targets...]
  local dir=$1 flags=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGMT_FUZZ=OFF \
    -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" -DCMAKE_C_FLAGS="$flags -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  local targets=()
  for target in "$@"; do targets+=(--target "$target"); done
  cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
  if ((in_process)); then
    # The regular build's CLI and nvcc-built samples (the sanitizer flags do not reach CUDA code anyway).
    mkdir -p "$dir/bin" "$dir/samples" "$dir/bench"
    cp -p "$regular/bin/gpumemtrace" "$dir/bin/"
    find "$regular/samples" -maxdepth 1 -type f -perm -u+x -exec cp -p {} "$dir/samples/" \;
    find "$regular/bench" -maxdepth 1 -type f -perm -u+x -exec cp -p {} "$dir/bench/" \;
  fi
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
      flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
      not_run=()  # tests whose programs an --in-process build does not have
      if ((in_process)); then
        configure_and_build "$asan_dir" "$flags" "${in_process_targets[@]}" gmt_sanitized_app_address \
          gmt_nvtx_unit_tests gmt_test_recording_injection gmt_test_nvtx_second_copy gmt_test_nvtx_copies \
          gmt_unwind_tests gmt_event_buffers_tests
        # html.*: they start chromium, which hangs under the preloaded ASan runtime, and test no in-process code.
        # package.*: they build and install (pip, g++) and test the packaging, not the in-process code (which the
        # e2e tests run under ASan); pip and g++ under the preloaded ASan runtime only slow them down.
        not_run=(-E 'NOT_BUILT|^sim_|e2e\.test_install|^html\.|^package\.')
      else
        configure_and_build "$asan_dir" "$flags"
      fi
      built=$(date +%s)
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
      ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$asan_dir" --output-on-failure -j"$jobs" -L unit "${not_run[@]}" ||
        status=1
      # The apps are uninstrumented (nvcc, python) and load instrumented libraries: the ASan runtime goes
      # first in LD_PRELOAD (verify_asan_link_order=0: the CLI puts libgpumemtrace.so in front of it). Leak
      # checking off: the test runner and the apps are not ours. ASan's SEGV/BUS/FPE handlers off: the
      # reliability tests crash apps on purpose and check that they die of the signal (ASan would report and
      # exit 1); a real fault in our code still fails the test that sees it.
      asan_runtime=$(g++ -print-file-name=libasan.so)
      export ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:handle_segv=0:handle_sigbus=0:handle_sigfpe=0
      trace=$(mktemp -u /tmp/gmt-asan-probe-XXXXXX.db)
      if GMT_OUTPUT=$trace preloaded "$asan_dir" "$asan_runtime" "$asan_dir/samples/threaded" 1 10 >/dev/null; then
        LD_PRELOAD=$asan_runtime ctest --test-dir "$asan_dir" --output-on-failure -j"$jobs" -L 'e2e|reliability' \
          -LE 'unit|gpu|fuzz' "${not_run[@]}" || status=1
      else
        echo "sanitize: asan: the preloaded library does not start under ASan: e2e and reliability tests not run" >&2
        status=1
      fi
      rm -f "$trace" "$trace-wal" "$trace-shm"
      unset ASAN_OPTIONS UBSAN_OPTIONS
      ;;
    tsan)
      if ((in_process)); then
        configure_and_build "$tsan_dir" "-fsanitize=thread" "${in_process_targets[@]}"
      else
        configure_and_build "$tsan_dir" "-fsanitize=thread"
      fi
      built=$(date +%s)
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      if ((in_process)); then
        ctest --test-dir "$tsan_dir" --output-on-failure -j"$jobs" -R '^reliability\.recorder_' || status=1
      else
        ctest --test-dir "$tsan_dir" --output-on-failure -j"$jobs" -L unit || status=1
      fi
      # Preloaded, TSan sees only our side of the app's synchronization, and GCC 12's TSan crashes when a
      # thread that took a libunwind stack exits (libunwind frees its per-thread cache after TSan finished
      # the thread): so one run, 16 threads, no stacks, not through the test suite.
      tsan_runtime=$(g++ -print-file-name=libtsan.so)
      trace=$(mktemp -u /tmp/gmt-tsan-XXXXXX.db)
      if GMT_OUTPUT=$trace.probe GMT_NO_STACKS=1 preloaded "$tsan_dir" "$tsan_runtime" "$tsan_dir/samples/threaded" 1 10 >/dev/null 2>&1; then
        if GMT_OUTPUT=$trace GMT_NO_STACKS=1 preloaded "$tsan_dir" "$tsan_runtime" "$tsan_dir/samples/threaded" 16 20000 \
             >/tmp/gmt-tsan-threads.log 2>&1 &&
           "$tsan_dir/bin/gpumemtrace" report --format json "$trace" 2>/dev/null |
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
