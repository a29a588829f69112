// Safetensors files (Hugging Face checkpoints): a memory-mapped reader, sharded folders, and a
// writer.
//
// File layout: u64 little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}, ...,
//  "__metadata__": {"key": "value"}}, then the data section; offsets are bytes relative to the
// start of the data section (8 + N). Tensor data is row-major, little-endian.
//
// Every open validates the whole header before returning: bounded header length, JSON syntax,
// duplicate keys, supported dtypes, shapes, offsets inside the data section, byte counts equal to
// product(shape) x dtype size, and no two tensors overlapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loaders/mapped_file.h"

namespace pinfer {

// The dtypes this engine reads from safetensors. Others (F64, I64, BOOL, F8_*...) are refused
// by name when a file is opened.
enum class StDtype { kF32, kF16, kBF16, kI32, kI8, kU8 };

std::string_view StDtypeName(StDtype t);  // "F32", "F16", ...
size_t StDtypeSize(StDtype t);            // bytes per element
// "F16" -> kF16; the error names the dtype and the supported ones.
absl::StatusOr<StDtype> ParseStDtype(std::string_view name);

// Headers longer than this are refused (real checkpoints use well under 1 MiB).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// A view of one tensor. `data` points into the file's mapping (owned by the SafetensorsFile it
// came from, valid while that object lives) and is NOT necessarily aligned for its dtype: read
// elements with memcpy or the helpers below.
struct StTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;  // row-major, outermost first; [] is a scalar
  const uint8_t* data = nullptr;
  size_t nbytes = 0;  // == numel() * StDtypeSize(dtype)

  int64_t numel() const;
};

// Element i of an I32 tensor / of an F32, F16 or BF16 tensor as float (no bounds checks).
int32_t StReadI32(const StTensor& t, int64_t i);
float StReadFloat(const StTensor& t, int64_t i);
// The whole tensor as floats (F32, F16, BF16; other dtypes are refused naming the tensor).
absl::StatusOr<std::vector<float>> StToFloats(const StTensor& t);

// One .safetensors file.
class SafetensorsFile {
 public:
  // Maps and validates the file. Errors name the path and what was wrong.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  // Validates bytes already in memory (tests, fuzzing); `file->path()` is used in messages.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromMapped(
      std::unique_ptr<MappedFile> file);

  // All tensors in data-offset order.
  const std::vector<StTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const StTensor* Find(std::string_view name) const;
  // "__metadata__" (empty when absent or null). Non-string values keep their JSON text.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_->path(); }
  // Byte offset of the data section within the file (8 + header length).
  size_t data_offset() const { return data_offset_; }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> file_;
  std::vector<StTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  size_t data_offset_ = 0;
};

// A checkpoint folder: either model.safetensors, or model.safetensors.index.json whose
// "weight_map" maps each tensor name to a shard file in the same folder. Every shard named is
// opened and validated, every mapped tensor must be present in its shard, and shard names may
// not leave the folder ("../x", absolute paths are refused). A path to a single .safetensors
// file is also accepted.
class SafetensorsModel {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsModel>> Open(const std::string& path);

  // All tensors of the model, sorted by name; pointers stay valid while this object lives.
  const std::vector<const StTensor*>& tensors() const { return tensors_; }
  const StTensor* Find(std::string_view name) const;
  // The opened files (one for an unsharded checkpoint).
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // The folder holding the files.
  const std::string& folder() const { return folder_; }

 private:
  SafetensorsModel() = default;
  std::string folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<const StTensor*> tensors_;
  std::map<std::string, const StTensor*, std::less<>> index_;
};

// A tensor to write: `data` holds exactly product(shape) x dtype-size little-endian bytes.
struct StTensorData {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Serializes tensors (laid out contiguously in the given order) and metadata to a safetensors
// image; the JSON header is padded with spaces to a multiple of 8 bytes so the data section is
// 8-byte aligned. Refuses duplicate or empty names, "__metadata__" as a name, and data whose
// size does not match the shape.
absl::StatusOr<std::vector<uint8_t>> SerializeSafetensors(
    const std::vector<StTensorData>& tensors, const std::map<std::string, std::string>& metadata);

// SerializeSafetensors, then writes the image to `path` (replacing it).
absl::Status WriteSafetensors(const std::string& path, const std::vector<StTensorData>& tensors,
                              const std::map<std::string, std::string>& metadata);

}  // namespace pinfer
