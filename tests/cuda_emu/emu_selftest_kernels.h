// Kernels for the emulator's self-test (emu_selftest_kernels.cu), each with a launcher.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace emu_selftest {

// out[b] = sum of x[b * n, (b + 1) * n): a block per row, shuffles and __syncthreads.
cudaError_t LaunchRowSums(const float* x, int rows, int n, float* out, cudaStream_t s);
// out[i] = x[i] * k; threads per block as given (for the launch-limit checks).
cudaError_t LaunchScale(const float* x, int n, float k, float* out, int threads, cudaStream_t s);
// Threads with threadIdx.x >= live return before a __syncthreads the others wait at.
cudaError_t LaunchDivergentBarrier(int live, float* out, cudaStream_t s);
// Lanes >= live return before a full-warp shuffle.
cudaError_t LaunchPartialShuffle(int live, float* out, cudaStream_t s);
// Reads a float4 at x + offset floats through __ldg.
cudaError_t LaunchVectorLoad(const float* x, int offset, float* out, cudaStream_t s);
// out[i] = x[i] for i < n + extra (extra > 0 reads past the end).
cudaError_t LaunchCopy(const float* x, int n, int extra, float* out, cudaStream_t s);

}  // namespace emu_selftest
