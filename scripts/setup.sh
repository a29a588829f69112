#!/usr/bin/env bash
# Installs the Debian packages pagedinfer needs (when missing), then configures and builds
# into ./build. Idempotent; runs as root (or through sudo) without prompts.
#   scripts/setup.sh            install + configure + build (Release)
#   BUILD_DIR=out scripts/setup.sh   build elsewhere
#   PAGEDINFER_CUDA_ARCHS=90a scripts/setup.sh   CUDA kernels for one GPU architecture only
#   PAGEDINFER_AARCH64=1 scripts/setup.sh   also the aarch64 cross build (scripts/aarch64.sh:
#     Debian's cross compiler, qemu-user and arm64 -dev packages; scripts/test.sh does it
#     otherwise, as its last stage)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

# libedit-dev: line editing and history in `pagedinfer chat` (BSD licence, unlike readline).
packages=(cmake ninja-build g++ pkg-config libabsl-dev libgtest-dev libgmock-dev
  googletest libbenchmark-dev libboost-dev nlohmann-json3-dev libedit-dev
  python3-jinja2  # python3-jinja2: the reference the chat-template interpreter is tested against
  jq  # jq: the report scripts (bench_report.sh, bench_serve_report.sh) and the latter's test
  clang libclang-rt-dev llvm)  # scripts/sanitize.sh (test.sh's sanitizer and fuzz stages):
  # clang 14, its ASan/UBSan and libFuzzer runtimes (libclang-rt-dev), llvm-symbolizer (llvm)
  # for file and line in sanitizer reports
# node + npm for the server's OpenAI-client test; skipped when a node install (NodeSource's
# nodejs bundles npm) is already on the PATH, since Debian's npm would conflict with it.
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The server test's JS client (tests/server: the openai npm package, pinned by its lock file).
if [ ! -d tests/server/node_modules ] && command -v npm >/dev/null; then
  echo "setup: npm ci in tests/server"
  (cd tests/server && npm ci --no-audit --no-fund >/dev/null)
fi

# PAGEDINFER_CUDA_ARCHS (when set): the GPUs the CUDA kernels are compiled for, instead of the
# default three (80;89;90a); .ci/run sets one.
cuda_archs=()
[ -n "${PAGEDINFER_CUDA_ARCHS:-}" ] && cuda_archs=("-DPAGEDINFER_CUDA_ARCHS=$PAGEDINFER_CUDA_ARCHS")
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  "${cuda_archs[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
echo "setup: built $BUILD_DIR/pagedinfer"
if [ "${PAGEDINFER_AARCH64:-0}" = 1 ]; then
  scripts/aarch64.sh setup
fi
