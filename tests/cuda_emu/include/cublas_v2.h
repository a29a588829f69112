// The host emulator's stand-in for cuBLAS's header (tests/cuda_emu/emu_cublas.h).
#pragma once
#include "tests/cuda_emu/emu_cublas.h"
