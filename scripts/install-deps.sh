#!/usr/bin/env bash
# Installs the Debian packages gpumemtrace builds and tests with. The CUDA toolkit is not a Debian package:
# it must already be installed, with nvcc on PATH (or in /usr/local/cuda/bin).
set -euo pipefail

# clang and libclang-rt-dev: libFuzzer, for the fuzz tests (tests/fuzz; they skip without it).
# clang-format: the layout check of scripts/test.sh (scripts/check-format.sh; version 14, Debian 12's).
# chromium: renders the HTML report headless in tests/html and bench/html_report.py (they skip without it); Playwright
# (PyPI, below) drives it in tests/html/test_viewer.py. (Debian's node-d3 is not needed: its d3.min.js is vendored,
# analysis/render/assets/vendor/README.md.)
packages=(cmake ninja-build g++ python3
          libsqlite3-dev sqlite3 libfmt-dev libcli11-dev nlohmann-json3-dev
          libunwind-dev libdw-dev libelf-dev libgtest-dev
          clang libclang-rt-dev clang-format
          chromium)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: the CUDA toolkit (nvcc) is required and is not a Debian package; install CUDA 13 first" >&2
  exit 1
fi

# Playwright from PyPI, without its own browser download: the tests hand it Debian's chromium.
if ! python3 -c "import playwright.sync_api" 2>/dev/null; then
  echo "install-deps: installing playwright (PyPI)"
  python3 -m pip install -q --disable-pip-version-check playwright
fi

# torch from PyPI in a virtualenv of its own, for the memory-viz test (scripts/install-torch-venv.sh says how big).
"$(dirname "$0")/install-torch-venv.sh"
