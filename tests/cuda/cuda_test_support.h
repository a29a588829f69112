// What the CUDA tests share (tests/cuda/*_test.cc, on a GPU and on the host emulator):
// skipping without a device, device buffers poisoned with NaN, seeded data and a relative
// comparison.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cuda/cuda_device.h"
#include "gtest/gtest.h"

namespace pinfer::cuda {

// Skips the test, saying why, when no CUDA device is present.
#define REQUIRE_CUDA()                                                                    \
  if (absl::Status pinfer_dev_ = ::pinfer::cuda::CudaDeviceStatus(); !pinfer_dev_.ok()) { \
    GTEST_SKIP() << pinfer_dev_.message();                                                \
  }

// A device buffer of n elements, poisoned (every byte 0xFF: NaN for floats) when made.
template <typename T>
class DevBuf {
 public:
  explicit DevBuf(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(T)),
              cudaSuccess);
    Poison();
  }
  explicit DevBuf(const std::vector<T>& v) : DevBuf(v.size()) { Upload(v); }
  ~DevBuf() { cudaFree(p_); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void Poison() { EXPECT_EQ(cudaMemset(p_, 0xFF, n_ * sizeof(T)), cudaSuccess); }
  void Upload(const std::vector<T>& v) {
    EXPECT_EQ(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> Download() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<T> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
  size_t n_;
};

inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) {
    x = u(rng);
    if (x == 0.0f) x = 0.5f;  // non-zero
  }
  return v;
}

// max |a - b| / max |b|, and no NaN anywhere in a.
inline void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double max_ref = 0, max_err = 0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << ": element " << i << " not written (NaN)";
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (e > max_err) {
      max_err = e;
      worst = i;
    }
  }
  EXPECT_LE(max_err, tol * std::max(max_ref, 1e-30))
      << what << ": worst element " << worst << " got " << got[worst] << " want " << want[worst]
      << " (relative error " << max_err / std::max(max_ref, 1e-30) << ", tolerance " << tol << ")";
}

}  // namespace pinfer::cuda
