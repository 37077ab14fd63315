#!/usr/bin/env bash
# The test command: checks the sources' layout (scripts/check-format.sh), builds, then runs every test (unit,
# end-to-end under the simulated CUDA runtime; the GPU suite skips itself when there is no GPU), then the code that
# runs inside the profiled process under ASan+UBSan and TSan (scripts/sanitize.sh --in-process; docs/reliability.md, "Sanitizers"; GMT_SANITIZE=0
# skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-format.sh
scripts/build.sh
ctest --test-dir "${GMT_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
if [ "${GMT_SANITIZE:-1}" != 0 ]; then
  scripts/sanitize.sh --in-process
fi
