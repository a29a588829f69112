#!/usr/bin/env bash
# Runs the whole test suite against ./build (after scripts/setup.sh). Exits non-zero when a test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900
