// The KV pool in device memory: the same block layout as the host storage
// (kvcache/kv_cache.h), so KvCache does all the accounting; copies of blocks (copy-on-write
// of shared blocks) are device-to-device copies.
//
// Ownership: the CUDA backend that made a pool and the KvCache that stores into it share it
// (std::shared_ptr); the device memory is freed when the last of the two lets go, in either
// order, so no destruction order has to be kept.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_cache.h"

namespace pinfer::cuda {

class DeviceKvPool {
 public:
  // num_blocks x block_bytes of device memory, zeroed (ResourceExhausted with sizes when the
  // allocation fails).
  static absl::StatusOr<std::shared_ptr<DeviceKvPool>> Create(size_t block_bytes,
                                                              int64_t num_blocks);
  ~DeviceKvPool();
  DeviceKvPool(const DeviceKvPool&) = delete;
  DeviceKvPool& operator=(const DeviceKvPool&) = delete;

  uint8_t* device_base() const { return data_; }
  size_t block_bytes() const { return block_bytes_; }
  int64_t num_blocks() const { return num_blocks_; }
  // Copies block src to block dst (device to device); a failure is kept in status().
  void CopyBlock(int32_t src, int32_t dst);
  // The first failed CopyBlock (KvStorage::CopyBlock cannot return one); OK otherwise.
  const absl::Status& status() const { return status_; }

 private:
  DeviceKvPool(uint8_t* data, size_t block_bytes, int64_t num_blocks)
      : data_(data), block_bytes_(block_bytes), num_blocks_(num_blocks) {}
  uint8_t* data_;
  size_t block_bytes_;
  int64_t num_blocks_;
  absl::Status status_;
};

// The KvStorage a KvCache holds for a device pool: a share of it (not host-addressable:
// base() is nullptr; CopyBlock copies on the device).
std::unique_ptr<KvStorage> SharedKvStorage(std::shared_ptr<DeviceKvPool> pool);

}  // namespace pinfer::cuda
