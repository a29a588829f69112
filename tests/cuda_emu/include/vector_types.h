// The host emulator's stand-in for CUDA's header (tests/cuda_emu/emu_types.h).
#pragma once
#include "tests/cuda_emu/emu_types.h"
