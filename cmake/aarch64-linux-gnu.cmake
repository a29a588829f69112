# Cross-compiling for 64-bit ARM Linux with Debian's cross toolchain (g++-aarch64-linux-gnu)
# against Debian's arm64 multiarch -dev packages (dpkg --add-architecture arm64; libabsl-dev:arm64,
# libgtest-dev:arm64, libgmock-dev:arm64). CTest runs the test binaries under qemu-user.
#   cmake -S . -B build-aarch64 -G Ninja --toolchain cmake/aarch64-linux-gnu.cmake
# scripts/aarch64.sh does all of it (packages, configure, build, tests).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: the target's libraries and CMake packages are under /usr/lib/aarch64-linux-gnu;
# header-only packages (nlohmann-json) are shared with the host under /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The tests run under user-mode emulation. -L / makes the dynamic loader the arm64 multiarch
# one (/lib/ld-linux-aarch64.so.1, from libc6:arm64), the same glibc build as the libc.so.6 and
# the abseil/GoogleTest libraries the tests load from /lib/aarch64-linux-gnu. With -L
# /usr/aarch64-linux-gnu the loader came from the cross toolchain's libc6-arm64-cross
# (2.36-8cross1) and libc.so.6 from libc6:arm64 (2.36-9+deb12u14): the two builds disagree on
# the loader's private state, and the first pthread_create looped forever (stories_test and
# matmul_test, the tests that start a thread pool, never finished).
find_program(PAGEDINFER_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${PAGEDINFER_QEMU_AARCH64};-L;/")
