#!/usr/bin/env bash
# Run HERE (a machine with Debian's package registry) before a GPU run: downloads the Debian packages that
# the GPU machine's image lacks into .gpu/debs/ (ignored by git; the device tool carries it). The GPU machine
# has the CUDA toolkit, cmake, g++ and python3, but no sqlite3.h, libunwind or libdw (shared/FACTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu/debs
cd .gpu/debs
packages=(libsqlite3-dev libsqlite3-0 libunwind-dev libunwind8 libdw-dev libdw1 libelf-dev libelf1
          zlib1g-dev liblzma-dev libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev)
apt-get download "${packages[@]}" >/dev/null
git -C ../.. describe --always --dirty > ../commit 2>/dev/null || true
ls -1 *.deb | wc -l | xargs echo "gpu-prepare: debs in .gpu/debs:"
