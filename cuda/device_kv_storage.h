// The KV pool in device memory: the same block layout as the host storage
// (kvcache/kv_cache.h), so KvCache does all the accounting; copies of blocks (copy-on-write
// of shared blocks) are device-to-device copies.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_cache.h"

namespace pinfer::cuda {

class DeviceKvStorage final : public KvStorage {
 public:
  // num_blocks x block_bytes of device memory (ResourceExhausted with sizes when it fails).
  static absl::StatusOr<std::unique_ptr<DeviceKvStorage>> Create(size_t block_bytes,
                                                                 int64_t num_blocks);
  ~DeviceKvStorage() override;

  uint8_t* base() override { return nullptr; }  // not host-addressable
  void CopyBlock(int32_t src, int32_t dst) override;

  uint8_t* device_base() const { return data_; }
  size_t block_bytes() const { return block_bytes_; }
  int64_t num_blocks() const { return num_blocks_; }
  // The first failed CopyBlock (KvStorage::CopyBlock cannot return one); OK otherwise.
  const absl::Status& status() const { return status_; }
  // Called with this storage's address when it is destroyed (the backend forgets it).
  void SetOnDestroy(DeviceKvStorage** slot) { slot_ = slot; }

 private:
  DeviceKvStorage(uint8_t* data, size_t block_bytes, int64_t num_blocks)
      : data_(data), block_bytes_(block_bytes), num_blocks_(num_blocks) {}
  uint8_t* data_;
  size_t block_bytes_;
  int64_t num_blocks_;
  absl::Status status_;
  DeviceKvStorage** slot_ = nullptr;
};

}  // namespace pinfer::cuda
