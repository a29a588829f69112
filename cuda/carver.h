// Carver: lays out byte ranges in one allocation, each starting at a multiple of kCarveAlign
// (256 bytes: enough for any vector load and for cuBLAS). Take() returns a range's offset;
// size() is the allocation to make once every range is taken.
#pragma once

#include <algorithm>
#include <cstddef>

namespace pinfer::cuda {

constexpr size_t kCarveAlign = 256;

class Carver {
 public:
  size_t Take(size_t bytes) {
    const size_t at = size_;
    size_ += (std::max<size_t>(bytes, 1) + kCarveAlign - 1) / kCarveAlign * kCarveAlign;
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace pinfer::cuda
