#!/usr/bin/env bash
# Runs the whole test suite against ./build (after scripts/setup.sh). Exits non-zero when a test fails.
# PAGEDINFER_AARCH64=1 (CI sets it) also runs the aarch64 build's tests under qemu
# (scripts/aarch64.sh; after PAGEDINFER_AARCH64=1 scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900
if [ "${PAGEDINFER_AARCH64:-0}" = 1 ]; then
  scripts/aarch64.sh test
fi
