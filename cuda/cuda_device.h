// Picking the backend at run time: what the application (the CLI, a test) calls to get a
// CUDA backend when a device is present.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/model/model.h"

namespace pinfer::cuda {

// OK when a CUDA device is usable; else Unavailable("no CUDA device: <cudaGetErrorString>").
absl::Status CudaDeviceStatus();

// A CUDA backend for `model` sized for max_tokens tokens per step on device `device`.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const Model& model, int max_tokens,
                                                         int device = 0);

// "cuda:0 (NVIDIA H200), 139.8 GiB, 132 SMs, sm_90" or why there is none.
std::string DescribeCudaDevice(int device = 0);

}  // namespace pinfer::cuda
