#!/usr/bin/env bash
# The 64-bit ARM build, cross-compiled on an x86-64 Debian 12 machine, and its tests under
# user-mode emulation (qemu-user): the engine's libraries and the tests of the quantized
# formats, the CPU kernels, attention, the CPU backend's thread splits and the stories260K golden text
# (cmake/aarch64-linux-gnu.cmake: an engine-only build, so the target needs only abseil,
# GoogleTest and the nlohmann-json headers). The tests run on qemu's default CPU (every
# extension, the dot product included), and all but the golden text again on a Cortex-A53
# (plain ARMv8.0 NEON), so both sides of every runtime check run.
#   scripts/aarch64.sh setup   Debian packages (arm64 multiarch), configure, build
#   scripts/aarch64.sh test    the tests under qemu-aarch64
# scripts/test.sh runs both as its last stage (what CI runs; PAGEDINFER_AARCH64=0 leaves it
# out), and PAGEDINFER_AARCH64=1 scripts/setup.sh runs the setup with the main build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${AARCH64_BUILD_DIR:-build-aarch64}
# The tests that run under emulation (each a target of the same name).
TESTS=(quants_test quants_kernels_test quants_layout_test quants_q8a_test quants_q8k_test quants_tile_test
  quants_packed_test quants_packed_k_test matmul_test repack_test kv_codec_test attention_kernels_test
  attention_test cpu_backend_threads_test stories_test)
# CPUs the tests run on: qemu's "max" (all extensions) and a Cortex-A53 (no dot product), so
# both sides of each run-time CPU check run. All of TESTS on both: about 18 s each here.
CPUS=(max cortex-a53)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

setup() {
  # Host tools, then the target's libraries as Debian's arm64 packages (multiarch): the
  # header-only nlohmann-json3-dev is shared with the host build (scripts/setup.sh).
  local host=(g++-aarch64-linux-gnu qemu-user) target=(libabsl-dev:arm64 libgtest-dev:arm64
    libgmock-dev:arm64) missing=()
  for p in "${host[@]}" "${target[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "aarch64: installing ${missing[*]}"
    dpkg --print-foreign-architectures | grep -qx arm64 || as_root dpkg --add-architecture arm64
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    --toolchain cmake/aarch64-linux-gnu.cmake "${launcher[@]}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${TESTS[@]}"
  echo "aarch64: built ${TESTS[*]} in $BUILD_DIR"
}

run_tests() {
  local regex
  regex="^($(IFS='|'; echo "${TESTS[*]}"))\$"
  for cpu in "${CPUS[@]}"; do
    echo "aarch64: tests under qemu-aarch64 -cpu $cpu"
    QEMU_CPU=$cpu ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" \
      --timeout 600 -R "$regex" || return 1
  done
}

case "${1:-}" in
  setup) setup ;;
  test) run_tests ;;
  *) echo "usage: scripts/aarch64.sh setup|test" >&2; exit 2 ;;
esac
