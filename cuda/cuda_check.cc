#include "cuda/cuda_check.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace pinfer::cuda {
namespace {

const char* CudaHint(cudaError_t err) {
  switch (err) {
    case cudaErrorMemoryAllocation:
      return "out of device memory: lower --memory-utilization, --max-num-batched-tokens or "
             "--max-model-len";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check nvidia-smi and the driver version, or use --device cpu";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction:
      return "this build has no kernels for this GPU: reconfigure with its architecture in "
             "-DPAGEDINFER_CUDA_ARCHS (e.g. 90a for H100/H200)";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
      return "a kernel faulted: rerun with PINFER_CUDA_SYNC=1 (and --enforce-eager) to name "
             "it, or under compute-sanitizer";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureUnjoined:
      return "an operation CUDA graph capture does not allow (allocation, synchronisation, "
             "the legacy stream); start with --enforce-eager to run without graphs";
    case cudaErrorInvalidValue:
      return "a launch or call got an invalid argument (grid size, shape, pointer)";
    default:
      return "see the CUDA error above";
  }
}

}  // namespace

absl::Status CudaError(cudaError_t err, const char* expr, const char* file, int line) {
  return absl::InternalError(absl::StrCat("CUDA error at ", file, ":", line, ": ", expr, " -> ",
                                          cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                          "); hint: ", CudaHint(err)));
}

absl::Status CublasError(cublasStatus_t st, const char* expr, const char* file, int line) {
  const char* hint = st == CUBLAS_STATUS_ALLOC_FAILED ? "out of device memory for cuBLAS"
                     : st == CUBLAS_STATUS_NOT_SUPPORTED
                         ? "this GEMM's types or shape are not supported on this GPU"
                         : "check the GEMM's shapes and leading dimensions";
  return absl::InternalError(absl::StrCat("cuBLAS error at ", file, ":", line, ": ", expr, " -> ",
                                          cublasGetStatusName(st), " (", cublasGetStatusString(st),
                                          "); hint: ", hint));
}

absl::Status DeviceAvailable() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("no CUDA device: ", cudaGetErrorString(err)));
  }
  if (n == 0) return absl::UnavailableError("no CUDA device: the driver reports 0 devices");
  return absl::OkStatus();
}

}  // namespace pinfer::cuda
