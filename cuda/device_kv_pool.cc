#include "cuda/device_kv_pool.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_check.h"

namespace pinfer::cuda {

absl::StatusOr<std::shared_ptr<DeviceKvPool>> DeviceKvPool::Create(size_t block_bytes,
                                                                   int64_t num_blocks) {
  if (block_bytes == 0 || num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("device KV pool of ", num_blocks, " blocks of ",
                                                   block_bytes, " bytes is empty"));
  }
  const size_t bytes = block_bytes * static_cast<size_t>(num_blocks);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free allocation error
    return absl::ResourceExhaustedError(
        absl::StrCat("could not allocate ", bytes, " bytes of device memory for the KV pool (",
                     num_blocks, " blocks of ", block_bytes, " bytes): ", cudaGetErrorString(err),
                     "; lower --memory-utilization or give --kv-cache-memory"));
  }
  // Zeroed, so that a row read before it is written decodes to zeros, never NaN.
  if (const cudaError_t set = cudaMemset(p, 0, bytes); set != cudaSuccess) {
    cudaFree(p);  // not leaked: the caller may retry with a smaller pool
    return CudaError(set, "cudaMemset(KV pool)", __FILE__, __LINE__);
  }
  return std::shared_ptr<DeviceKvPool>(
      new DeviceKvPool(static_cast<uint8_t*>(p), block_bytes, num_blocks));
}

DeviceKvPool::~DeviceKvPool() { cudaFree(data_); }

void DeviceKvPool::CopyBlock(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= num_blocks_ || dst >= num_blocks_) {
    if (status_.ok()) {
      status_ = absl::InternalError(absl::StrCat("CopyBlock(", src, ", ", dst,
                                                 ") outside a pool of ", num_blocks_, " blocks"));
    }
    return;
  }
  // The legacy default stream orders this after the backend's (blocking) stream's work.
  const cudaError_t err = cudaMemcpy(data_ + static_cast<size_t>(dst) * block_bytes_,
                                     data_ + static_cast<size_t>(src) * block_bytes_, block_bytes_,
                                     cudaMemcpyDeviceToDevice);
  if (err != cudaSuccess && status_.ok()) {
    status_ = CudaError(err, "cudaMemcpy(block copy)", __FILE__, __LINE__);
  }
}

namespace {

class SharedDeviceStorage final : public KvStorage {
 public:
  explicit SharedDeviceStorage(std::shared_ptr<DeviceKvPool> pool) : pool_(std::move(pool)) {}
  uint8_t* base() override { return nullptr; }  // not host-addressable
  void CopyBlock(int32_t src, int32_t dst) override { pool_->CopyBlock(src, dst); }

 private:
  std::shared_ptr<DeviceKvPool> pool_;
};

}  // namespace

std::unique_ptr<KvStorage> SharedKvStorage(std::shared_ptr<DeviceKvPool> pool) {
  return std::make_unique<SharedDeviceStorage>(std::move(pool));
}

}  // namespace pinfer::cuda
