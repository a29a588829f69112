#!/usr/bin/env bash
# Runs the whole test suite (what CI runs), after scripts/setup.sh:
#   1. the unit and integration tests against ./build (BUILD_DIR);
#   2. scripts/sanitize.sh: a clang build (build-asan) of the tests of untrusted input and of
#      the fuzz targets, run under ASan + UBSan, then each libFuzzer target for 20 s.
#   3. scripts/aarch64.sh: the 64-bit ARM cross build (build-aarch64: Debian's cross compiler,
#      qemu-user and arm64 -dev packages, installed when missing) of the engine's kernel tests
#      and the stories260K golden text, run under qemu-aarch64 (setup, then test).
# Every stage runs; the script exits non-zero when anything failed, naming what.
#   PAGEDINFER_QUICK=1 scripts/test.sh   stage 1 only (a developer's quick check; CI runs all)
#   PAGEDINFER_AARCH64=0 scripts/test.sh   without stage 3 (a developer's switch; CI runs it)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
t0=$(date +%s)
failed=()

ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900 || failed+=(tests)
echo "test.sh: unit and integration tests: $(($(date +%s) - t0)) s"

if [ "${PAGEDINFER_QUICK:-0}" = 1 ]; then
  echo "test.sh: PAGEDINFER_QUICK=1: sanitizer, fuzzing and aarch64 stages skipped (CI runs them)"
else
  scripts/sanitize.sh || failed+=(sanitize)
  if [ "${PAGEDINFER_AARCH64:-1}" = 1 ]; then
    t1=$(date +%s)
    { scripts/aarch64.sh setup && scripts/aarch64.sh test; } || failed+=(aarch64)
    echo "test.sh: aarch64 cross build and qemu tests: $(($(date +%s) - t1)) s"
  else
    echo "test.sh: PAGEDINFER_AARCH64=0: aarch64 stage skipped (CI runs it)"
  fi
fi

echo "test.sh: $(($(date +%s) - t0)) s in all"
if ((${#failed[@]})); then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: all passed"
