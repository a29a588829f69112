// PINFER_LAUNCH(kernel, grid, block, smem, stream)(args...): a kernel launch, written once for
// both builds of the kernels. nvcc gets `kernel<<<grid, block, smem, stream>>>(args...)`; the
// host emulator (tests/cuda_emu/emu_kernel.h, included before any kernel source) defines the
// macro first, as a call that runs the grid on the host. Every launch in cuda/*.cu goes
// through it (a bare <<<...>>> does not compile in the emulator's build).
#pragma once

#ifndef PINFER_LAUNCH
#define PINFER_LAUNCH(kernel, ...) kernel<<<__VA_ARGS__>>>
#endif
