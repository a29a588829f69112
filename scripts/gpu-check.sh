#!/usr/bin/env bash
# One command for an offline GPU machine: build with CUDA, run the GPU tests, then the
# benchmarks (kernel GB/s against device-to-device copy; decode tokens/s of synthetic
# llama2-7b Q4_0 and Q4_K_M at batch 1 and 16, context 512 and 4096, KV f16 and q8_0).
#
#   PREFIX=/opt/debs scripts/gpu-check.sh    # -dev packages unpacked from .deb files there
#   BUILD=build-gpu MODELS=/tmp/synth SKIP_E2E=1 scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
MODELS=${MODELS:-$BUILD/synth-models}
JOBS=${JOBS:-$(nproc)}
if [[ -n "${PREFIX:-}" ]]; then
  # Debian -dev packages unpacked with dpkg -x into $PREFIX (no package registry offline).
  export CMAKE_PREFIX_PATH="$PREFIX/usr:$PREFIX/usr/lib/x86_64-linux-gnu/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:$PREFIX/usr/share/pkgconfig:$PREFIX/usr/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CPATH="$PREFIX/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== build (CUDA on)"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGEDINFER_CUDA=ON
[[ -d "$BUILD/cuda" ]] || { echo "error: CUDA backend not configured (nvcc not found?)"; exit 1; }
ninja -C "$BUILD" -j"$JOBS" pagedinfer cuda_kernels_test cuda_bench

echo "== GPU tests"
"$BUILD/tests/cuda_kernels_test"

echo "== kernels"
"$BUILD/bench/cuda_bench" kernels

if [[ -z "${SKIP_E2E:-}" ]]; then
  echo "== end-to-end decode"
  mkdir -p "$MODELS"
  for type in Q4_0 Q4_K_M; do
    f="$MODELS/llama2-7b-$type.gguf"
    [[ -f "$f" ]] || "$BUILD/pagedinfer" synth --shape llama2-7b --type "$type" -o "$f"
    for batch in 1 16; do
      for ctx in 512 4096; do
        for kv in f16 q8_0; do
          "$BUILD/bench/cuda_bench" decode "$f" "$batch" "$ctx" "$kv"
        done
      done
    done
  done
fi
