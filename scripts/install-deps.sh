#!/usr/bin/env bash
# Installs the Debian packages gpumemtrace needs, by purpose:
#   scripts/install-deps.sh build        what building needs (cmake, g++, the libraries)
#   scripts/install-deps.sh test         build, plus what the tests need (GoogleTest, sqlite3, clang for the
#                                        fuzzers, clang-format 14 for the layout check, python3-venv for the wheel test)
#   scripts/install-deps.sh html         chromium, Playwright (PyPI) and a torch venv, only for the report tests
#                                        in tests/html (the page in headless chromium, driven by Playwright in
#                                        test_viewer.py; the memory-viz pickle in torch's own reader) and
#                                        bench/html_report.py; they skip without them
#   scripts/install-deps.sh              build and test (a newcomer's scripts/test.sh); .ci/run asks for all three
# The CUDA toolkit is not a Debian package: it must already be installed, with nvcc on PATH (or in
# /usr/local/cuda/bin).
set -euo pipefail

build=(cmake ninja-build g++ python3
       libsqlite3-dev libfmt-dev libcli11-dev nlohmann-json3-dev
       libunwind-dev libdw-dev libelf-dev)
# clang and libclang-rt-dev: libFuzzer, for the fuzz tests (tests/fuzz; they skip without it).
# clang-format: the layout check of scripts/test.sh (scripts/check-format.sh; version 14, Debian 12's).
# python3-venv, python3-pip: the wheel's test installs it into a fresh venv (tests/package).
test=(libgtest-dev libgmock-dev sqlite3 clang libclang-rt-dev clang-format python3-venv python3-pip)
html=(chromium)

purposes=("$@")
((${#purposes[@]})) || purposes=(build test)
packages=()
for purpose in "${purposes[@]}"; do
  case $purpose in
    build) packages+=("${build[@]}") ;;
    test) packages+=("${build[@]}" "${test[@]}") ;;
    html) packages+=("${html[@]}") ;;
    *) echo "install-deps: unknown purpose '$purpose' (build, test, html)" >&2; exit 2 ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${packages[@]}" | sort -u); do
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

if [[ " ${purposes[*]} " == *" html "* ]]; then
  # Playwright from PyPI, without its own browser download: the tests hand it Debian's chromium. (Debian's node-d3
  # is not needed: its d3.min.js is vendored, analysis/render/assets/vendor/README.md.)
  if ! python3 -c "import playwright.sync_api" 2>/dev/null; then
    echo "install-deps: installing playwright (PyPI)"
    python3 -m pip install -q --disable-pip-version-check playwright
  fi
  # torch from PyPI in a virtualenv of its own, for the memory-viz test (scripts/install-torch-venv.sh says how big).
  "$(dirname "$0")/install-torch-venv.sh"
fi
