#!/usr/bin/env bash
# Checks that the C++ and CUDA sources follow .clang-format (docs/design.md, "Code layout"): lists every file whose
# layout differs and exits 1. Run with --fix to rewrite them in place. The layout is clang-format 14's (Debian 12's
# clang-format package, which scripts/install-deps.sh installs): another version lays some constructs out
# differently, so with another version this says so and checks nothing, except in CI (CI=true), where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
[ "${1:-}" = --fix ] && fix=1
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not found (scripts/install-deps.sh installs it)" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
  echo "check-format: the layout is clang-format 14's; this is clang-format ${version:-of unknown version}, so the" \
       "layout is not checked" >&2
  [ "${CI:-}" = true ] && exit 1
  exit 0
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.cc')
if [ "$fix" = 1 ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || differ+=("$f")
done
if ((${#differ[@]})); then
  echo "check-format: ${#differ[@]} file(s) differ from .clang-format's layout" \
       "(scripts/check-format.sh --fix rewrites them):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
