// A read-only file mapped into memory (or an owned byte buffer with the same interface).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

class MappedFile {
 public:
  // Maps the whole file read-only. Errors name the path and the OS error.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  // Wraps bytes held in memory (tests, fuzzing, files built in memory).
  static std::unique_ptr<MappedFile> FromBytes(std::vector<uint8_t> bytes);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::vector<uint8_t> owned_;
  std::string path_;
};

}  // namespace pinfer
