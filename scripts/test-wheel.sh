#!/usr/bin/env bash
# CI's check of the wheel (issue 39): builds and repairs it (scripts/build-wheel.sh), installs it into a fresh venv
# with pytest from PyPI, and runs tests/package/test_wheel.py against that install: `gpumemtrace run --simulate`
# from the venv, and a pytest session (`pytest --gpumemtrace`) in which a leaking test fails its marker naming the
# leaking line and a clean one passes. Prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/build-wheel.sh
built=$(date +%s)
wheel=$(realpath "${GMT_WHEEL_DIR:-build/dist}"/*.whl)
samples=$(realpath "${GMT_BUILD_DIR:-build}")/samples
(cd tests/package && GMT_WHEEL=$wheel GMT_SAMPLES_DIR=$samples python3 -m unittest -v test_wheel)
end=$(date +%s)
echo "test-wheel: wheel built and repaired in $((built - start)) s, installed and tested in $((end - built)) s"
