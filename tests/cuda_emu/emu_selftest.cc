// The CUDA emulator's own tests: correct kernels give exact results, and what a GPU would
// refuse or fault on is reported (divergent barriers, partial-warp shuffles, misaligned
// vector loads, reads past an allocation, launch limits, capture rules, copy directions).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cuda_emu/emu_selftest_kernels.h"

namespace emu_selftest {
namespace {

class Emu : public ::testing::Test {
 protected:
  void SetUp() override {
    emu::ResetForTest();
    ASSERT_EQ(cudaStreamCreate(&s_), cudaSuccess);
  }
  void TearDown() override {
    for (void* p : owned_) cudaFree(p);
    cudaStreamDestroy(s_);
    emu::ResetForTest();
  }
  float* Dev(const std::vector<float>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, v.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    owned_.push_back(p);
    return static_cast<float*>(p);
  }
  float* Dev(size_t n) { return Dev(std::vector<float>(n, 7.0f)); }
  std::vector<float> Host(const float* d, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  cudaStream_t s_ = nullptr;
  std::vector<void*> owned_;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);  // non-zero
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST_F(Emu, ShufflesAndBarriersReduceExactly) {
  const int rows = 5, n = 1000;
  const std::vector<float> x = Random(static_cast<size_t>(rows) * n, 1);
  float* dx = Dev(x);
  float* dout = Dev(rows);
  ASSERT_EQ(LaunchRowSums(dx, rows, n, dout, s_), cudaSuccess);
  const std::vector<float> got = Host(dout, rows);
  for (int r = 0; r < rows; ++r) {
    double want = 0.0;
    for (int i = 0; i < n; ++i) want += x[static_cast<size_t>(r) * n + i];
    EXPECT_NEAR(got[static_cast<size_t>(r)], want, 1e-5 * want) << "row " << r;
  }
}

TEST_F(Emu, FreshDeviceMemoryIsPoisoned) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 64 * sizeof(float)), cudaSuccess);
  owned_.push_back(p);
  for (float v : Host(static_cast<float*>(p), 64)) EXPECT_TRUE(std::isnan(v));
}

TEST_F(Emu, DivergentSyncthreadsIsAFaultAndSticky) {
  float* out = Dev(64);
  EXPECT_EQ(LaunchDivergentBarrier(64, out, s_), cudaSuccess);  // every thread arrives
  EXPECT_EQ(LaunchDivergentBarrier(40, out, s_), cudaErrorLaunchFailure);
  EXPECT_EQ(emu::counters().faults, 1);
  // Sticky, as a GPU context: later calls fail too.
  EXPECT_EQ(cudaStreamSynchronize(s_), cudaErrorLaunchFailure);
  EXPECT_EQ(LaunchScale(out, 8, 2.0f, out, 32, s_), cudaErrorLaunchFailure);
}

TEST_F(Emu, ShuffleWithMissingLanesIsAFault) {
  float* out = Dev(32);
  EXPECT_EQ(LaunchPartialShuffle(32, out, s_), cudaSuccess);
  EXPECT_EQ(Host(out, 32)[0], 1.0f);
  EXPECT_EQ(LaunchPartialShuffle(20, out, s_), cudaErrorLaunchFailure);
}

TEST_F(Emu, MisalignedVectorLoadIsAFault) {
  float* x = Dev(Random(16, 2));
  float* out = Dev(1);
  EXPECT_EQ(LaunchVectorLoad(x, 4, out, s_), cudaSuccess);
  EXPECT_EQ(LaunchVectorLoad(x, 1, out, s_), cudaErrorMisalignedAddress);
}

TEST_F(Emu, LaunchLimitsAreChecked) {
  float* x = Dev(Random(2048, 3));
  float* out = Dev(2048);
  EXPECT_EQ(LaunchScale(x, 2048, 2.0f, out, 1024, s_), cudaSuccess);
  EXPECT_EQ(Host(out, 1)[0], 2.0f * Host(x, 1)[0]);
  EXPECT_EQ(LaunchScale(x, 2048, 2.0f, out, 2048, s_), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky: reading it cleared it
}

TEST(EmuDeath, ReadingPastAnAllocationFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* x = nullptr;
        void* out = nullptr;
        cudaMalloc(&x, 1024 * sizeof(float));  // exactly a page: the guard page follows
        cudaMalloc(&out, 64 * sizeof(float));
        LaunchCopy(static_cast<float*>(x), 1024, 64, static_cast<float*>(out), nullptr);
      },
      "");
}

TEST_F(Emu, CopiesCheckTheirDirection) {
  float* d = Dev(16);
  std::vector<float> h(16, 1.0f);
  EXPECT_EQ(cudaMemcpy(h.data(), d, 64, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 128, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, h.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
}

TEST_F(Emu, CapacityIsEnforced) {
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, free + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
}

TEST_F(Emu, GraphsRecordArgumentsAndReplay) {
  const std::vector<float> x = Random(256, 4);
  float* dx = Dev(x);
  float* out = Dev(256);
  float k = 3.0f;
  ASSERT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(LaunchScale(dx, 256, k, out, 128, s_), cudaSuccess);
  k = 5.0f;  // a launch copies its arguments: the graph keeps 3
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s_, &g), cudaSuccess);
  EXPECT_EQ(Host(out, 1)[0], 7.0f) << "a captured launch must not run";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  cudaGraphDestroy(g);
  ASSERT_EQ(cudaGraphLaunch(exec, s_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
  EXPECT_EQ(Host(out, 256)[100], 3.0f * x[100]);
  cudaGraphExecDestroy(exec);
}

TEST_F(Emu, CaptureRulesInvalidateTheCapture) {
  float* d = Dev(16);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 64), cudaSuccess);
  std::vector<float> pageable(16, 1.0f);
  auto capture = [&](auto&& body) {
    EXPECT_EQ(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    body();
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s_, &g);
    if (g) cudaGraphDestroy(g);
    return ended;
  };
  EXPECT_EQ(capture([&] {
              EXPECT_EQ(cudaMemcpyAsync(d, pinned, 64, cudaMemcpyHostToDevice, s_), cudaSuccess);
            }),
            cudaSuccess);
  EXPECT_EQ(capture([&] {
              EXPECT_EQ(cudaMemcpyAsync(d, pageable.data(), 64, cudaMemcpyHostToDevice, s_),
                        cudaErrorStreamCaptureUnsupported);
            }),
            cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(capture([&] {
              void* p = nullptr;
              EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
            }),
            cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(
      capture([&] { EXPECT_EQ(cudaStreamSynchronize(s_), cudaErrorStreamCaptureUnsupported); }),
      cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(capture([&] {
              EXPECT_EQ(LaunchScale(d, 16, 2.0f, d, 32, nullptr), cudaErrorStreamCaptureImplicit);
            }),
            cudaErrorStreamCaptureInvalidated);
  cudaFreeHost(pinned);
}

TEST_F(Emu, GemmExMatchesAReference) {
  // C[m x n] = A^T B with A stored k x m (lda k), B k x n (ldb k), half inputs.
  const int m = 5, n = 3, k = 40;
  const std::vector<float> a = Random(static_cast<size_t>(m) * k, 5),
                           b = Random(static_cast<size_t>(n) * k, 6);
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = pinfer::Fp32ToFp16(a[i]);
  for (size_t i = 0; i < b.size(); ++i) b16[i] = pinfer::Fp32ToFp16(b[i]);
  void *da = nullptr, *db = nullptr;
  ASSERT_EQ(cudaMalloc(&da, a16.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, b16.size() * 2), cudaSuccess);
  owned_.push_back(da);
  owned_.push_back(db);
  cudaMemcpy(da, a16.data(), a16.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b16.data(), b16.size() * 2, cudaMemcpyHostToDevice);
  float* dc = Dev(static_cast<size_t>(m) * n);
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, s_), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, da, CUDA_R_16F, k, db, CUDA_R_16F,
                   k, &beta, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k + 1, &alpha, da, CUDA_R_16F, k + 1,
                         db, CUDA_R_16F, k + 1, &beta, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE)
      << "operands past their allocations";
  const std::vector<float> c = Host(dc, static_cast<size_t>(m) * n);
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double want = 0.0;
      for (int l = 0; l < k; ++l) {
        want += static_cast<double>(pinfer::Fp16ToFp32(a16[static_cast<size_t>(i) * k + l])) *
                pinfer::Fp16ToFp32(b16[static_cast<size_t>(j) * k + l]);
      }
      EXPECT_NEAR(c[static_cast<size_t>(j) * m + i], want, 1e-5 * std::fabs(want));
    }
  }
  cublasDestroy(h);
}

}  // namespace
}  // namespace emu_selftest
