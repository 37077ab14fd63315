#!/usr/bin/env bash
# The test command: checks the sources' layout (scripts/check-format.sh), builds, then runs every test (unit,
# end-to-end under the simulated CUDA runtime; the GPU suite skips itself when there is no GPU; the HTML tests skip
# without chromium: scripts/install-deps.sh html).
#
#   scripts/test.sh [--sanitize] [ctest arguments...]
#
# --sanitize (or GMT_SANITIZE=1; .ci/run passes it) adds the sanitizer passes: the libFuzzer targets of the
# analysis (clang, ASan+UBSan; tests/fuzz) and the code that runs inside the profiled process under ASan+UBSan
# and TSan (scripts/sanitize.sh --in-process; docs/reliability.md, "Sanitizers"), which take about as long again as
# the build and the tests together (on 2 cores, 2026-12-06: 20m22s with them).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=${GMT_SANITIZE:-0}
ctest_args=()
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=1 ;;
    *) ctest_args+=("$arg") ;;
  esac
done
fuzz=OFF
[ "$sanitize" != 0 ] && fuzz=ON
scripts/check-format.sh
scripts/build.sh -DGMT_FUZZ=$fuzz
ctest --test-dir "${GMT_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "${ctest_args[@]}"
if [ "$sanitize" != 0 ]; then
  scripts/sanitize.sh --in-process
fi
