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
# The tests run under user-mode emulation; -L finds the target's dynamic loader and libc.
find_program(PAGEDINFER_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${PAGEDINFER_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
