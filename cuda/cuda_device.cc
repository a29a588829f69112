#include "cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"

namespace pinfer::cuda {

absl::Status CudaDeviceStatus() { return DeviceAvailable(); }

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const Model& model, int max_tokens,
                                                         int device) {
  auto b = CudaBackend::Create(model, max_tokens, device);
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

std::string DescribeCudaDevice(int device) {
  if (absl::Status s = DeviceAvailable(); !s.ok()) return std::string(s.message());
  cudaDeviceProp p;
  const cudaError_t err = cudaGetDeviceProperties(&p, device);
  if (err != cudaSuccess) return absl::StrFormat("cuda:%d: %s", device, cudaGetErrorString(err));
  return absl::StrFormat("cuda:%d (%s), %.1f GiB, %d SMs, sm_%d%d", device, p.name,
                         static_cast<double>(p.totalGlobalMem) / (1ull << 30),
                         p.multiProcessorCount, p.major, p.minor);
}

}  // namespace pinfer::cuda
