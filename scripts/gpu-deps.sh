#!/usr/bin/env bash
# Downloads the Debian packages the GPU build needs into gpu-deps/ (ignored by git), for a GPU
# machine that has no package registry: carry the folder there and scripts/gpu-check.sh
# unpacks it into its build folder (DEPS_DEBS=gpu-deps, the default when the folder exists).
# About 15 MB. Run on a Debian 12 machine with apt sources (this project's dev machine).
#
# usage: scripts/gpu-deps.sh [DIR]     (DIR defaults to gpu-deps)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-gpu-deps}
mkdir -p "$dir"
# Headers, CMake packages and shared libraries of what CMakeLists.txt finds, and the shared
# libraries those link against that a CUDA image may lack. libboost1.74-dev: Boost.Beast and
# Asio headers for the server's HTTP layer (header-only).
packages=(libabsl-dev libabsl20220623 googletest libgtest-dev libbenchmark-dev
          libbenchmark1debian libboost1.74-dev nlohmann-json3-dev)
(cd "$dir" && apt-get download "${packages[@]}")
ls -la "$dir"
echo "carry $dir to the GPU machine; scripts/gpu-check.sh unpacks it" >&2
