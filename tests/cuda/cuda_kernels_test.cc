// Every CUDA kernel against the CPU reference on seeded random non-zero data, and the CUDA
// backend's greedy text on stories260K against the CPU's. Output buffers are filled with NaN
// (bytes 0xFF) before each launch, so an element a kernel fails to write shows up. All tests
// skip, saying why, when no CUDA device is present.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_device.h"
#include "cuda/device_matmul.h"
#include "cuda/gemv_groups.cuh"
#include "cuda/gemv_units.cuh"
#include "cuda/kernels.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/engine.h"
#include "engine/memory/memory_report.h"
#include "engine/model/model_config.h"
#include "engine/synth/synth.h"
#include "gtest/gtest.h"
#include "kvcache/attention.h"
#include "kvcache/kv_codec.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer::cuda {
namespace {

#define REQUIRE_CUDA()                                                    \
  if (absl::Status pinfer_dev_ = CudaDeviceStatus(); !pinfer_dev_.ok()) { \
    GTEST_SKIP() << pinfer_dev_.message();                                \
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

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
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
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol,
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

// Both lane layouts of the decode GEMV (kernels.h), the default restored afterwards.
const GemvLayout kGemvLayouts[] = {GemvLayout::kGroups, GemvLayout::kUnits};
std::string LayoutName(GemvLayout l) { return l == GemvLayout::kGroups ? " groups" : " units"; }
struct DefaultGemvLayout {
  ~DefaultGemvLayout() {
    SetGemvLayout(GemvLayout::kGroups);
    SetProgrammaticLaunch(false);
  }
};

// ---- element-wise kernels (tolerance 1e-5 relative; RoPE 1e-5 too: the frequencies come
// from the host, so only the device's sinf/cosf differ, by a few ulp) ----

TEST(CudaKernels, RmsNormMatchesCpu) {
  REQUIRE_CUDA();
  const int rows = 5, dim = 96;
  const auto x = Random(rows * dim, 1), w = Random(dim, 2);
  std::vector<float> want(x.size());
  for (int r = 0; r < rows; ++r) RmsNorm(&x[r * dim], w.data(), dim, 1e-5f, &want[r * dim]);
  DevBuf<float> dx(x), dw(w), out(x.size());
  ASSERT_EQ(LaunchRmsNorm(dx.get(), nullptr, dw.get(), rows, dim, 1e-5f, out.get(), nullptr),
            cudaSuccess);
  ExpectClose(out.Download(), want, 1e-5, "rmsnorm");
  // Gathered rows (the logits rows of a step).
  DevBuf<int32_t> idx(std::vector<int32_t>{4, 1});
  DevBuf<float> out2(2 * dim);
  ASSERT_EQ(LaunchRmsNorm(dx.get(), idx.get(), dw.get(), 2, dim, 1e-5f, out2.get(), nullptr),
            cudaSuccess);
  std::vector<float> want2(want.begin() + 4 * dim, want.end());
  want2.insert(want2.end(), want.begin() + dim, want.begin() + 2 * dim);
  ExpectClose(out2.Download(), want2, 1e-5, "rmsnorm gathered");
}

TEST(CudaKernels, RopeMatchesCpuBothPairOrders) {
  REQUIRE_CUDA();
  const int n = 4, heads = 3, hd = 64;
  const std::vector<int32_t> pos = {0, 7, 100, 3000};
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    auto v = Random(n * heads * hd, 3);
    DevBuf<float> dv(v);
    DevBuf<int32_t> dp(pos);
    DevBuf<float> dfreq(RopeFrequencies(10000.0f, hd));
    ASSERT_EQ(LaunchRope(dv.get(), n, heads, hd, dp.get(), dfreq.get(), style == RopeStyle::kHalves,
                         nullptr),
              cudaSuccess);
    for (int t = 0; t < n; ++t) ApplyRope(&v[t * heads * hd], heads, hd, pos[t], 10000.0f, style);
    ExpectClose(dv.Download(), v, 1e-5, style == RopeStyle::kHalves ? "rope halves" : "rope pairs");
    // q and k (fewer heads) in one launch.
    const int kv_heads = 2;
    auto q = Random(n * heads * hd, 4), k = Random(n * kv_heads * hd, 5);
    DevBuf<float> dq(q), dk(k);
    ASSERT_EQ(LaunchRopeQK(dq.get(), heads, dk.get(), kv_heads, n, hd, dp.get(), dfreq.get(),
                           style == RopeStyle::kHalves, nullptr),
              cudaSuccess);
    for (int t = 0; t < n; ++t) {
      ApplyRope(&q[t * heads * hd], heads, hd, pos[t], 10000.0f, style);
      ApplyRope(&k[t * kv_heads * hd], kv_heads, hd, pos[t], 10000.0f, style);
    }
    ExpectClose(dq.Download(), q, 1e-5, "rope q of q+k");
    ExpectClose(dk.Download(), k, 1e-5, "rope k of q+k");
  }
}

TEST(CudaKernels, RopeScalingMatchesCpu) {
  REQUIRE_CUDA();
  const int n = 4, heads = 2, hd = 128;
  const std::vector<int32_t> pos = {0, 9, 700, 5000};
  // Llama 3.1's per-pair factors and a linear scale, together.
  const std::vector<float> factors = Llama3RopeFactors(500000.0f, hd, 8, 1, 4, 8192);
  for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalves}) {
    auto v = Random(n * heads * hd, 6);
    DevBuf<float> dv(v);
    DevBuf<int32_t> dp(pos);
    DevBuf<float> df(factors);
    DevBuf<float> dfreq(RopeFrequencies(500000.0f, hd));
    ASSERT_EQ(LaunchRope(dv.get(), n, heads, hd, dp.get(), dfreq.get(), style == RopeStyle::kHalves,
                         nullptr, 0.5f, df.get()),
              cudaSuccess);
    for (int t = 0; t < n; ++t) {
      ApplyRope(&v[t * heads * hd], heads, hd, pos[t], 500000.0f, style, 0.5f, factors.data());
    }
    ExpectClose(dv.Download(), v, 1e-5, "rope with scaling");
  }
}

TEST(CudaKernels, SwiGluAddBiasMatchCpu) {
  REQUIRE_CUDA();
  const int rows = 3, width = 100;
  auto g = Random(rows * width, 4, -4, 4);
  const auto u = Random(rows * width, 5), b = Random(width, 6);
  DevBuf<float> dg(g), du(u), db(b);
  ASSERT_EQ(LaunchSwiGlu(dg.get(), du.get(), rows * width, nullptr), cudaSuccess);
  SwiGlu(g.data(), u.data(), rows * width);
  ExpectClose(dg.Download(), g, 1e-5, "swiglu");
  ASSERT_EQ(LaunchAdd(dg.get(), du.get(), rows * width, nullptr), cudaSuccess);
  AddInPlace(g.data(), u.data(), rows * width);
  ExpectClose(dg.Download(), g, 1e-6, "add");
  ASSERT_EQ(LaunchAddBias(dg.get(), db.get(), rows, width, nullptr), cudaSuccess);
  for (int r = 0; r < rows; ++r) AddInPlace(&g[r * width], b.data(), width);
  ExpectClose(dg.Download(), g, 1e-6, "bias");
}

// ---- weights: embedding rows and Y = X W^T in every storage type ----

const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0,
                           GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

struct HostMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix w;
};

HostMatrix MakeMatrix(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  HostMatrix m;
  const size_t rb = GgmlRowBytes(t, cols);
  m.bytes.resize(rb * rows);
  const auto f = Random(rows * cols, seed);
  for (int64_t r = 0; r < rows; ++r) QuantizeRow(t, &f[r * cols], &m.bytes[r * rb], cols);
  m.w.name = "test";
  m.w.type = t;
  m.w.rows = rows;
  m.w.cols = cols;
  m.w.row_bytes = rb;
  m.w.data = m.bytes.data();
  return m;
}

DeviceMatrix ToDevice(const HostMatrix& m, DevBuf<uint8_t>& buf) {
  buf.Upload(m.bytes);
  return DeviceMatrix{static_cast<int>(m.w.type), m.w.rows, m.w.cols, m.w.row_bytes, buf.get()};
}

// The cuBLAS path's activation conversion: half saturates at +-65504 (NaN stays NaN),
// bfloat16 rounds to nearest even; both bit-exact to the host conversions.
TEST(CudaKernels, ToHalfSaturatesAndRoundsLikeTheHost) {
  REQUIRE_CUDA();
  std::vector<float> x = Random(64, 21, -3.0f, 3.0f);
  const std::vector<float> special = {65504.0f, 65519.0f, -70000.0f, 1e9f, 6e-8f, std::nanf("")};
  std::copy(special.begin(), special.end(), x.begin());
  DevBuf<float> dx(x);
  for (bool bf16 : {false, true}) {
    DevBuf<uint16_t> out(x.size());
    ASSERT_EQ(LaunchToHalf(dx.get(), static_cast<int64_t>(x.size()), out.get(), bf16, nullptr),
              cudaSuccess);
    const std::vector<uint16_t> got = out.Download();
    for (size_t i = 0; i < x.size(); ++i) {
      const float v = x[i];
      const float sat = std::fabs(v) > 65504.0f ? std::copysign(65504.0f, v) : v;
      const uint16_t want = bf16 ? Fp32ToBf16(v) : Fp32ToFp16(sat);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(bf16 ? Bf16ToFp32(got[i]) : Fp16ToFp32(got[i]))) << i;
      } else {
        EXPECT_EQ(got[i], want) << (bf16 ? "bf16" : "half") << " of " << v;
      }
    }
  }
}

TEST(CudaKernels, EmbeddingDequantizesEveryType) {
  REQUIRE_CUDA();
  const int64_t rows = 12, cols = 512;
  for (GgmlType t : kTypes) {
    const std::string name(GgmlTypeInfoOf(t).name);
    HostMatrix m = MakeMatrix(t, rows, cols, 7);
    DevBuf<uint8_t> wb(m.bytes.size());
    const DeviceMatrix dm = ToDevice(m, wb);
    const std::vector<int32_t> tokens = {3, 0, 11, 3};
    std::vector<float> want(tokens.size() * cols);
    for (size_t i = 0; i < tokens.size(); ++i) {
      DequantizeRow(t, m.w.row(tokens[i]), &want[i * cols], cols);
    }
    DevBuf<int32_t> dt(tokens);
    DevBuf<float> out(want.size());
    ASSERT_EQ(LaunchEmbedding(dm, dt.get(), static_cast<int>(tokens.size()), out.get(), nullptr),
              cudaSuccess);
    ExpectClose(out.Download(), want, 1e-6, "embedding " + name);
  }
}

// GEMV (n <= 16): 1e-4 relative to the largest output; cuBLAS (n > 16, half inputs): 1e-2.
TEST(CudaKernels, MatMulMatchesCpuEveryTypeAndBatch) {
  REQUIRE_CUDA();
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const int64_t rows = 96, cols = 512;
  auto mm = DeviceMatMul::Create(handle, 48, cols);
  ASSERT_TRUE(mm.ok()) << mm.status();
  ThreadPool pool(2);
  for (GgmlType t : kTypes) {
    const std::string name(GgmlTypeInfoOf(t).name);
    HostMatrix m = MakeMatrix(t, rows, cols, 8);
    DevBuf<uint8_t> wb(m.bytes.size());
    const DeviceMatrix dm = ToDevice(m, wb);
    DefaultGemvLayout restore;
    for (GemvLayout layout : kGemvLayouts) {
      SetGemvLayout(layout);
      for (int n : {1, 3, 16, 17, 48}) {
        const auto x = Random(n * cols, 9 + n);
        std::vector<float> want(n * rows);
        MatMul(m.w, x.data(), n, want.data(), pool);
        DevBuf<float> dx(x), dy(want.size());
        ASSERT_TRUE((*mm)->Run(dm, dx.get(), n, dy.get(), nullptr).ok());
        ExpectClose(dy.Download(), want, n <= kMaxGemvTokens ? 1e-4 : 1e-2,
                    "matmul " + name + LayoutName(layout) + " n=" + std::to_string(n));
      }
    }
  }
  mm->reset();
  cublasDestroy(handle);
}

// The cuBLAS path of a block type over more rows than one dequantized tile holds (2 tiles, the
// second partial), accumulating into y (the residual form), eagerly and then captured into a
// CUDA graph on a stream of its own with a user workspace (as the backend captures it; a
// cublasSetStream inside Run must not leave cuBLAS on its default pool): 1e-2 relative (half
// inputs), and the replay within 1e-6 of the eager result (same shapes, same workspace).
TEST(CudaKernels, MatMulCublasTilesAccumulateAndCapture) {
  REQUIRE_CUDA();
  const int64_t cols = 8192;
  const int64_t rows = static_cast<int64_t>(kWeightTileBytes / (2 * cols)) + 40;
  const int n = 20;
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  DevBuf<uint8_t> ws(32u << 20);
  ASSERT_EQ(cublasSetStream(handle, stream), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetWorkspace(handle, ws.get(), 32u << 20), CUBLAS_STATUS_SUCCESS);
  auto mm = DeviceMatMul::Create(handle, n, cols, false, ws.get(), 32u << 20);
  ASSERT_TRUE(mm.ok()) << mm.status();
  ThreadPool pool(2);
  HostMatrix m = MakeMatrix(GgmlType::kQ4_0, rows, cols, 71);
  DevBuf<uint8_t> wb(m.bytes.size());
  const DeviceMatrix dm = ToDevice(m, wb);
  const auto x = Random(n * cols, 72), y0 = Random(n * rows, 73);
  std::vector<float> want(n * rows);
  MatMul(m.w, x.data(), n, want.data(), pool);
  AddInPlace(want.data(), y0.data(), static_cast<int64_t>(want.size()));
  DevBuf<float> dx(x), dy(y0);
  ASSERT_TRUE((*mm)->Run(dm, dx.get(), n, dy.get(), stream, /*accumulate=*/true).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> eager = dy.Download();
  ExpectClose(eager, want, 1e-2, "cuBLAS tiles + accumulate, eager");
  dy.Upload(y0);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const absl::Status captured = (*mm)->Run(dm, dx.get(), n, dy.get(), stream, true);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(captured.ok()) << captured;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> replay = dy.Download();
  ExpectClose(replay, eager, 1e-6, "cuBLAS tiles + accumulate, graph replay vs eager");
  ExpectClose(replay, want, 1e-2, "cuBLAS tiles + accumulate, graph replay");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  mm->reset();
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
}

// Act-order matrices (GPTQ desc_act, repacked to Q4_1): x is gathered through the matrix's
// input permutation first, on both paths (1e-4 GEMV, 1e-2 cuBLAS); RunMany does the same.
TEST(CudaKernels, MatMulAppliesInputPermutation) {
  REQUIRE_CUDA();
  cublasHandle_t handle;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const int64_t rows = 48, cols = 256;
  auto mm = DeviceMatMul::Create(handle, 32, cols, /*permuted_inputs=*/true);
  ASSERT_TRUE(mm.ok()) << mm.status();
  ThreadPool pool(2);
  HostMatrix m = MakeMatrix(GgmlType::kQ4_1, rows, cols, 61);
  m.w.input_perm.resize(cols);
  for (int64_t k = 0; k < cols; ++k) m.w.input_perm[k] = static_cast<int32_t>(k);
  std::shuffle(m.w.input_perm.begin(), m.w.input_perm.end(), std::mt19937(5));
  DevBuf<uint8_t> wb(m.bytes.size());
  DeviceMatrix dm = ToDevice(m, wb);
  DevBuf<int32_t> dperm(m.w.input_perm);
  dm.perm = dperm.get();
  for (int n : {1, 5, 20}) {
    const auto x = Random(n * cols, 62 + n);
    std::vector<float> want(n * rows);
    MatMul(m.w, x.data(), n, want.data(), pool);
    DevBuf<float> dx(x), dy(want.size()), dy2(want.size()), dy3(want.size());
    ASSERT_TRUE((*mm)->Run(dm, dx.get(), n, dy.get(), nullptr).ok());
    const double tol = n <= kMaxGemvTokens ? 1e-4 : 1e-2;
    ExpectClose(dy.Download(), want, tol, "permuted matmul n=" + std::to_string(n));
    const DeviceMatrix* ws[] = {&dm, &dm};
    float* const ys[] = {dy2.get(), dy3.get()};
    ASSERT_TRUE((*mm)->RunMany(ws, ys, 2, dx.get(), n, nullptr).ok());
    ExpectClose(dy2.Download(), want, tol, "permuted RunMany (first) n=" + std::to_string(n));
    ExpectClose(dy3.Download(), want, tol, "permuted RunMany (second) n=" + std::to_string(n));
  }
  mm->reset();
  cublasDestroy(handle);
}

// ---- the GEMV's lanes on the host (no device needed) ----

// Runs a warp's 32 lanes one after another with the kernel's own lane functions and adds
// their sums, as the kernel's shuffles do.
template <typename Lane>
std::vector<float> HostGemv(const HostMatrix& m, const uint8_t* data, const std::vector<float>& x,
                            int n, Lane lane_fn) {
  std::vector<float> y(static_cast<size_t>(n) * m.w.rows);
  for (int64_t r = 0; r < m.w.rows; ++r) {
    float total[kMaxGemvTokens] = {};
    for (int lane = 0; lane < 32; ++lane) {
      float acc[kMaxGemvTokens] = {};
      lane_fn(data + r * m.w.row_bytes, x.data(), m.w.cols, n, lane, acc);
      for (int t = 0; t < n; ++t) total[t] += acc[t];
    }
    for (int t = 0; t < n; ++t) y[t * m.w.rows + r] = total[t];
  }
  return y;
}

// HostGemv of lane_fn against the CPU's MatMul for n tokens of each count in ns (x seeded
// x_seed + n), 1e-4 relative.
template <typename Lane>
void ExpectHostLanesMatchCpu(const HostMatrix& m, std::initializer_list<int> ns, uint32_t x_seed,
                             Lane lane_fn, const std::string& what) {
  ThreadPool pool(2);
  for (int n : ns) {
    const auto x = Random(n * m.w.cols, x_seed + n);
    std::vector<float> want(n * m.w.rows);
    MatMul(m.w, x.data(), n, want.data(), pool);
    const auto got = HostGemv(m, m.bytes.data(), x, n, lane_fn);
    ExpectClose(got, want, 1e-4, what + " n=" + std::to_string(n));
  }
}

template <int kType, int kUnitBlocks, bool kWords>
void CheckLegacyLanes(GgmlType t, int64_t cols) {
  const std::string name = std::string(GgmlTypeInfoOf(t).name) + " cols=" + std::to_string(cols) +
                           " unit=" + std::to_string(kUnitBlocks) + (kWords ? " words" : " halves");
  ExpectHostLanesMatchCpu(
      MakeMatrix(t, 24, cols, 51), {1, 3, 16}, 60,
      [](const uint8_t* row, const float* xp, int64_t c, int nn, int lane,
         float(&acc)[kMaxGemvTokens]) {
        gemv::LegacyLane<kType, kUnitBlocks, kWords>(row, xp, c, nn, lane, 32, acc);
      },
      "host lanes " + name);
}

template <int kType>
void CheckKLanes(GgmlType t) {
  const std::string name(GgmlTypeInfoOf(t).name);
  for (int64_t cols : {256, 768, 2816}) {  // 1, 3 and 11 super-blocks per row
    ExpectHostLanesMatchCpu(
        MakeMatrix(t, 12, cols, 52), {1, 4, 16}, 70,
        [](const uint8_t* row, const float* xp, int64_t c, int nn, int lane,
           float(&acc)[kMaxGemvTokens]) { gemv::KLane<kType>(row, xp, c, nn, lane, 32, acc); },
        "host lanes " + name + " cols=" + std::to_string(cols));
  }
}

template <int kType>
void CheckGroupLanes(GgmlType t) {
  const std::string name(GgmlTypeInfoOf(t).name);
  const bool k_type = t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
  for (int64_t cols :
       k_type ? std::vector<int64_t>{256, 768, 2816} : std::vector<int64_t>{32, 160, 512}) {
    ExpectHostLanesMatchCpu(
        MakeMatrix(t, 12, cols, 53), {1, 4, 16}, 80,
        [](const uint8_t* row, const float* xp, int64_t c, int nn, int lane,
           float(&acc)[kMaxGemvTokens]) { gemv::GroupLane<kType>(row, xp, c, nn, lane, 32, acc); },
        "host group lanes " + name + " cols=" + std::to_string(cols));
  }
}

// Every load path of the GEMV's two lane layouts, its index math checked against the CPU's
// MatMul.
TEST(CudaGemvLanes, EveryLoadPathMatchesCpuOnHost) {
  CheckGroupLanes<kWQ4_0>(GgmlType::kQ4_0);
  CheckGroupLanes<kWQ4_1>(GgmlType::kQ4_1);
  CheckGroupLanes<kWQ5_0>(GgmlType::kQ5_0);
  CheckGroupLanes<kWQ5_1>(GgmlType::kQ5_1);
  CheckGroupLanes<kWQ8_0>(GgmlType::kQ8_0);
  CheckGroupLanes<kWQ4_K>(GgmlType::kQ4_K);
  CheckGroupLanes<kWQ5_K>(GgmlType::kQ5_K);
  CheckGroupLanes<kWQ6_K>(GgmlType::kQ6_K);
  // Pairs of 18/22/34-byte blocks (an even number per row) and single blocks (odd or even).
  CheckLegacyLanes<kWQ4_0, 2, true>(GgmlType::kQ4_0, 512);
  CheckLegacyLanes<kWQ4_0, 1, false>(GgmlType::kQ4_0, 160);
  CheckLegacyLanes<kWQ4_0, 1, false>(GgmlType::kQ4_0, 512);
  CheckLegacyLanes<kWQ5_0, 2, true>(GgmlType::kQ5_0, 512);
  CheckLegacyLanes<kWQ5_0, 1, false>(GgmlType::kQ5_0, 160);
  CheckLegacyLanes<kWQ8_0, 2, true>(GgmlType::kQ8_0, 512);
  CheckLegacyLanes<kWQ8_0, 1, false>(GgmlType::kQ8_0, 160);
  // 20/24-byte blocks: 4-byte loads, or 2-byte loads when the matrix is not 4-byte aligned.
  CheckLegacyLanes<kWQ4_1, 1, true>(GgmlType::kQ4_1, 160);
  CheckLegacyLanes<kWQ4_1, 1, false>(GgmlType::kQ4_1, 160);
  CheckLegacyLanes<kWQ5_1, 1, true>(GgmlType::kQ5_1, 512);
  CheckLegacyLanes<kWQ5_1, 1, false>(GgmlType::kQ5_1, 160);
  CheckKLanes<kWQ4_K>(GgmlType::kQ4_K);
  CheckKLanes<kWQ5_K>(GgmlType::kQ5_K);
  CheckKLanes<kWQ6_K>(GgmlType::kQ6_K);
}

// The GEMV's other load paths, 1e-4 as above: rows of an odd number of 18/22/34-byte blocks
// (2-byte loads instead of 4-byte loads of block pairs), and matrices starting 2 bytes into
// their buffer (no 4- or 16-byte loads; Q4_K and Q5_K take the byte-wise kernel).
TEST(CudaKernels, GemvOtherLayoutsMatchCpu) {
  REQUIRE_CUDA();
  ThreadPool pool(2);
  struct Layout {
    int64_t cols;
    size_t offset;
  };
  for (GgmlType t : kTypes) {
    const std::string name(GgmlTypeInfoOf(t).name);
    if (t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16) continue;
    const bool k_type = t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K;
    for (const Layout& lay : {Layout{160, 0}, Layout{512, 2}}) {
      if (k_type && lay.cols % 256 != 0) continue;
      const int64_t rows = 40;
      HostMatrix m = MakeMatrix(t, rows, lay.cols, 31);
      DevBuf<uint8_t> wb(m.bytes.size() + lay.offset);
      ASSERT_EQ(
          cudaMemcpy(wb.get() + lay.offset, m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice),
          cudaSuccess);
      const DeviceMatrix dm{static_cast<int>(t), rows, lay.cols, m.w.row_bytes,
                            wb.get() + lay.offset};
      DefaultGemvLayout restore;
      for (GemvLayout layout : kGemvLayouts) {
        SetGemvLayout(layout);
        for (int n : {1, 5, 16}) {
          const auto x = Random(n * lay.cols, 40 + n);
          std::vector<float> want(n * rows);
          MatMul(m.w, x.data(), n, want.data(), pool);
          DevBuf<float> dx(x), dy(want.size());
          ASSERT_EQ(LaunchGemv(dm, dx.get(), n, dy.get(), rows, nullptr), cudaSuccess);
          ExpectClose(dy.Download(), want, 1e-4,
                      "gemv " + name + LayoutName(layout) + " cols=" + std::to_string(lay.cols) +
                          " offset=" + std::to_string(lay.offset) + " n=" + std::to_string(n));
        }
      }
    }
  }
}

// The fused GEMV launches, 1e-4 as above: Q, K and V in one launch (GQA: K and V have fewer
// rows), gate/up with SwiGLU, and y += W x (residuals); mixed types are refused (the caller
// then launches one by one).
TEST(CudaKernels, FusedGemvLaunchesMatchCpu) {
  REQUIRE_CUDA();
  ThreadPool pool(2);
  const int64_t cols = 512;
  for (GgmlType t :
       {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    const std::string name(GgmlTypeInfoOf(t).name);
    HostMatrix mq = MakeMatrix(t, 64, cols, 81), mk = MakeMatrix(t, 16, cols, 82),
               mv = MakeMatrix(t, 16, cols, 83);
    DevBuf<uint8_t> bq(mq.bytes.size()), bk(mk.bytes.size()), bv(mv.bytes.size());
    const DeviceMatrix dq = ToDevice(mq, bq), dk = ToDevice(mk, bk), dv = ToDevice(mv, bv);
    DefaultGemvLayout restore;
    struct Case {
      GemvLayout layout;
      int n;
      bool pdl;  // launched as programmatic dependents
    };
    for (const Case& c : {Case{GemvLayout::kGroups, 1, false}, Case{GemvLayout::kGroups, 7, false},
                          Case{GemvLayout::kGroups, 16, false}, Case{GemvLayout::kUnits, 1, false},
                          Case{GemvLayout::kUnits, 7, false}, Case{GemvLayout::kUnits, 16, false},
                          Case{GemvLayout::kGroups, 1, true}, Case{GemvLayout::kUnits, 16, true}}) {
      const int n = c.n;
      SetGemvLayout(c.layout);
      SetProgrammaticLaunch(c.pdl);
      const std::string what =
          name + LayoutName(c.layout) + (c.pdl ? " pdl" : "") + " n=" + std::to_string(n);
      const auto x = Random(n * cols, 90 + n);
      DevBuf<float> dx(x);
      // Q, K, V.
      std::vector<float> wq(n * 64), wk(n * 16), wv(n * 16);
      MatMul(mq.w, x.data(), n, wq.data(), pool);
      MatMul(mk.w, x.data(), n, wk.data(), pool);
      MatMul(mv.w, x.data(), n, wv.data(), pool);
      DevBuf<float> yq(wq.size()), yk(wk.size()), yv(wv.size());
      const DeviceMatrix* ws[] = {&dq, &dk, &dv};
      float* const ys[] = {yq.get(), yk.get(), yv.get()};
      ASSERT_EQ(LaunchGemvMulti(ws, ys, 3, dx.get(), n, nullptr), cudaSuccess) << what;
      ExpectClose(yq.Download(), wq, 1e-4, "multi q " + what);
      ExpectClose(yk.Download(), wk, 1e-4, "multi k " + what);
      ExpectClose(yv.Download(), wv, 1e-4, "multi v " + what);
      // SwiGLU of two 16-row matrices (K's and V's as gate and up).
      std::vector<float> sw = wk;
      SwiGlu(sw.data(), wv.data(), static_cast<int64_t>(sw.size()));
      DevBuf<float> ysw(sw.size());
      ASSERT_EQ(LaunchGemvSwiGlu(dk, dv, dx.get(), n, ysw.get(), nullptr), cudaSuccess) << what;
      ExpectClose(ysw.Download(), sw, 1e-4, "swiglu " + what);
      // y += W x.
      const auto y0 = Random(n * 64, 95 + n);
      std::vector<float> acc = y0;
      AddInPlace(acc.data(), wq.data(), static_cast<int64_t>(acc.size()));
      DevBuf<float> ya(y0);
      ASSERT_EQ(LaunchGemv(dq, dx.get(), n, ya.get(), 64, nullptr, /*accumulate=*/true),
                cudaSuccess)
          << what;
      ExpectClose(ya.Download(), acc, 1e-4, "accumulate " + what);
    }
  }
  // Different types in one launch: refused, nothing launched.
  HostMatrix a = MakeMatrix(GgmlType::kQ4_K, 16, cols, 84),
             b = MakeMatrix(GgmlType::kQ6_K, 16, cols, 85);
  DevBuf<uint8_t> ba(a.bytes.size()), bb(b.bytes.size());
  const DeviceMatrix da = ToDevice(a, ba), db = ToDevice(b, bb);
  DevBuf<float> dx(Random(cols, 99)), y1(16), y2(16);
  const DeviceMatrix* ws[] = {&da, &db};
  float* const ys[] = {y1.get(), y2.get()};
  EXPECT_EQ(LaunchGemvMulti(ws, ys, 2, dx.get(), 1, nullptr), cudaErrorNotSupported);
  EXPECT_EQ(LaunchGemvSwiGlu(da, db, dx.get(), 1, y1.get(), nullptr), cudaErrorNotSupported);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// ---- KV: row encoding and paged attention in every KV format ----

struct HostKv {
  std::unique_ptr<KvCache> cache;
  KvCacheConfig cfg;
};

HostKv MakeHostKv(KvDtype d, int layers, int kv_heads, int hd) {
  HostKv h;
  h.cfg.n_layers = layers;
  h.cfg.n_kv_heads = kv_heads;
  h.cfg.head_dim = hd;
  h.cfg.dtype = d;
  h.cfg.block_size = 16;
  h.cfg.max_model_len = 256;
  h.cfg.max_num_seqs = 4;
  h.cfg.num_blocks = 12;
  h.cfg.prefix_caching = false;
  auto c = KvCache::Create(h.cfg);
  EXPECT_TRUE(c.ok()) << c.status();
  h.cache = std::move(*c);
  return h;
}

KvLayerView View(const KvCache& cache, int layer, uint8_t* base, int kv_dim) {
  KvLayerView kv;
  kv.dtype = static_cast<int>(cache.config().dtype);
  kv.base = base;
  kv.block_bytes = cache.block_bytes();
  kv.row_bytes = cache.row_bytes();
  kv.block_size = cache.block_size();
  kv.v_offset = kv.block_size * kv.row_bytes;
  kv.layer_offset = static_cast<size_t>(layer) * 2 * kv.v_offset;
  kv.kv_dim = kv_dim;
  return kv;
}

// The GPU writes the same bytes as KvEncodeRow (block formats: decoded values within one
// quantization step, should the CPU compiler have fused a multiply-add), and nothing else.
// Plain, and with RoPE fused (LaunchRopeKvWrite: K rotated on its way in, q in place; both
// pair orders): the rows hold the CPU's encoding of the (rotated) values, within one
// quantization step where the encoding rounds; q as ApplyRope leaves it, 1e-5.
TEST(CudaKernels, KvWriteMatchesCpuEncoding) {
  REQUIRE_CUDA();
  const int layers = 2, kv_heads = 2, hd = 64, kv_dim = kv_heads * hd, heads = 4;
  struct Mode {
    bool rope;
    RopeStyle style;
  };
  for (const Mode mode : {Mode{false, RopeStyle::kHalves}, Mode{true, RopeStyle::kHalves},
                          Mode{true, RopeStyle::kAdjacentPairs}})
    for (KvDtype d : kAllKvDtypes) {
      const std::string name =
          std::string(KvDtypeName(d)) + (!mode.rope                         ? ""
                                         : mode.style == RopeStyle::kHalves ? " rope halves"
                                                                            : " rope pairs");
      HostKv h = MakeHostKv(d, layers, kv_heads, hd);
      KvCache& c = *h.cache;
      ASSERT_TRUE(c.AddSequence(1).ok());
      ASSERT_TRUE(c.Append(1, 21).ok());
      const std::vector<int> positions = {0, 15, 16, 20};
      const int n = static_cast<int>(positions.size());
      // One more token with slot -1 (a CUDA graph's padding row): it must write nothing.
      const auto k = Random((n + 1) * kv_dim, 10, -3, 3), v = Random((n + 1) * kv_dim, 11, -3, 3);
      std::vector<int64_t> slot(n + 1, -1);
      const auto table = c.BlockTable(1);
      for (int t = 0; t < n; ++t) {
        slot[t] = static_cast<int64_t>(table[positions[t] / 16]) * c.block_bytes() +
                  (positions[t] % 16) * c.row_bytes();
      }
      const size_t pool = c.block_bytes() * c.num_blocks();
      DevBuf<uint8_t> dpool(pool);  // poisoned: bytes 0xFF
      DevBuf<float> dk(k), dv(v);
      DevBuf<int64_t> ds(slot);
      std::vector<float> q = Random((n + 1) * heads * hd, 12), k_want = k;
      std::vector<int32_t> pos(positions.begin(), positions.end());
      pos.push_back(0);  // the padding row
      DevBuf<float> dq(q), dfreq(RopeFrequencies(10000.0f, hd));
      DevBuf<int32_t> dpos(pos);
      if (mode.rope) {
        ASSERT_EQ(LaunchRopeKvWrite(View(c, 1, dpool.get(), kv_dim), dq.get(), heads, dk.get(),
                                    dv.get(), n + 1, ds.get(), hd, dpos.get(), dfreq.get(),
                                    mode.style == RopeStyle::kHalves, nullptr),
                  cudaSuccess);
        for (int t = 0; t <= n; ++t) {
          ApplyRope(&q[t * heads * hd], heads, hd, pos[t], 10000.0f, mode.style);
          ApplyRope(&k_want[t * kv_dim], kv_heads, hd, pos[t], 10000.0f, mode.style);
        }
        ExpectClose(dq.Download(), q, 1e-5, "q " + name);
        EXPECT_EQ(dk.Download(), k) << name << ": k itself must stay unrotated";
      } else {
        ASSERT_EQ(LaunchKvWrite(View(c, 1, dpool.get(), kv_dim), dk.get(), dv.get(), n + 1,
                                ds.get(), nullptr),
                  cudaSuccess);
      }
      const std::vector<uint8_t> got = dpool.Download();
      std::vector<bool> written(pool, false);
      const uint8_t* host_base = c.Row(0, 0, 0, 0);
      for (int t = 0; t < n; ++t) {
        for (int which = 0; which < 2; ++which) {
          uint8_t* row = c.TokenRow(1, positions[t], 1, which);
          KvEncodeRow(d, (which ? v : k_want).data() + t * kv_dim, row, kv_dim);
          std::fill_n(written.begin() + (row - host_base), c.row_bytes(), true);
          std::vector<float> a(kv_dim), b(kv_dim);
          KvDecodeRange(d, &got[row - host_base], kv_dim, 0, kv_dim, a.data());
          KvDecodeRange(d, row, kv_dim, 0, kv_dim, b.data());
          const double step = (d == KvDtype::kQ4_0 ? 3.0 / 8 : d == KvDtype::kQ8_0 ? 3.0 / 127 : 0);
          // Rotated values may differ from the CPU's in the last bit (FMA contraction), which
          // the format's rounding can turn into one of its own steps.
          const double rel = !mode.rope || which == 1 ? 0.0
                             : d == KvDtype::kF32     ? 1e-6
                             : d == KvDtype::kF16     ? 1e-3
                             : d == KvDtype::kBF16    ? 8e-3
                             : d == KvDtype::kFp8E4M3 ? 0.13
                                                      : 0.0;
          double row_max = 0;
          for (float x : b) row_max = std::max(row_max, std::fabs(static_cast<double>(x)));
          for (int i = 0; i < kv_dim; ++i) {
            // fp8 rounds relative to each value; the others relative to the row (cancellation
            // in x0 c - x1 s leaves small values with large relative error).
            const double mag = d == KvDtype::kFp8E4M3 ? std::fabs(b[i]) : row_max;
            ASSERT_LE(std::fabs(a[i] - b[i]), step * 1.01 + rel * mag + 1e-30)
                << name << " token " << t << (which ? " v" : " k") << " value " << i;
          }
        }
      }
      // Outside the written rows every byte is still the poison.
      size_t untouched_diff = 0;
      for (size_t i = 0; i < pool; ++i) untouched_diff += !written[i] && got[i] != 0xFF;
      EXPECT_EQ(untouched_diff, 0u) << name << ": bytes outside the written rows changed";
    }
}

// Two sequences with interleaved (non-contiguous) block tables; a prefill chunk of one and a
// decode token of the other, GQA 8/2 heads, head_dim 64, 96 (not a multiple of the warp) and
// 256 (the kernel's largest); 1e-4 relative to the largest output.
// Split attention's geometry (no device needed): about two blocks per SM for one sequence,
// splits a multiple of kAttnMinSplitLen that cover the context in at most max_splits.
TEST(CudaAttentionSplits, CountAndLength) {
  EXPECT_EQ(AttentionMaxSplits(32, 132), 9);  // llama2-7b on an H100/H200
  EXPECT_EQ(AttentionMaxSplits(8, 132), 33);
  EXPECT_EQ(AttentionMaxSplits(1, 1000), kAttnMaxSplits);
  EXPECT_EQ(AttentionMaxSplits(64, 16), 1);
  for (int splits : {1, 3, 9, 64}) {
    for (int ctx : {1, 31, 32, 33, 100, 4096, 131072}) {
      const int len = AttentionSplitLen(ctx, splits);
      EXPECT_EQ(len % kAttnMinSplitLen, 0);
      EXPECT_LE((ctx + len - 1) / len, splits) << ctx << " positions in " << splits;
      EXPECT_GE(len * splits, ctx);
    }
  }
}

TEST(CudaKernels, PagedAttentionMatchesCpuEveryKvFormat) {
  REQUIRE_CUDA();
  for (const int hd : {64, 96, 256}) {
    const int layers = 2, heads = 8, kv_heads = 2, kv_dim = kv_heads * hd;
    for (KvDtype d : kAllKvDtypes) {
      const std::string name = std::string(KvDtypeName(d)) + " head_dim " + std::to_string(hd);
      HostKv h = MakeHostKv(d, layers, kv_heads, hd);
      KvCache& c = *h.cache;
      ASSERT_TRUE(c.AddSequence(1).ok());
      ASSERT_TRUE(c.AddSequence(2).ok());
      ASSERT_TRUE(c.Append(1, 10).ok());
      ASSERT_TRUE(c.Append(2, 10).ok());
      ASSERT_TRUE(c.Append(1, 90).ok());
      ASSERT_TRUE(c.Append(2, 10).ok());
      uint32_t seed = 20;
      for (SeqId s : {1, 2}) {
        for (int p = 0; p < c.num_tokens(s); ++p) {
          for (int l = 0; l < layers; ++l) {
            for (int which = 0; which < 2; ++which) {
              const auto vals = Random(kv_dim, seed++, -2, 2);
              KvEncodeRow(d, vals.data(), c.TokenRow(s, p, l, which), kv_dim);
            }
          }
        }
      }
      // Tokens: sequence 1 positions 93..99 (a prefill chunk), sequence 2 position 19.
      std::vector<SeqId> seq;
      std::vector<int32_t> pos;
      for (int p = 93; p < 100; ++p) seq.push_back(1), pos.push_back(p);
      seq.push_back(2), pos.push_back(19);
      const int n = static_cast<int>(seq.size());
      const auto q = Random(n * heads * hd, 99);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      AttentionShape shape{heads, kv_heads, hd, scale};
      std::vector<float> want(n * heads * hd);
      for (int t = 0; t < n; ++t) {
        std::vector<float> scratch(AttentionScratchFloats(shape));
        AttendOne(c, seq[t], 1, shape, &q[t * heads * hd], pos[t] + 1, 0, kv_heads,
                  &want[t * heads * hd], scratch.data());
      }
      std::vector<int32_t> tables, start;
      for (SeqId s : {1, 2}) {
        start.push_back(static_cast<int32_t>(tables.size()));
        for (int32_t b : c.BlockTable(s)) tables.push_back(b);
      }
      std::vector<int32_t> table_start(n);
      for (int t = 0; t < n; ++t) table_start[t] = start[seq[t] - 1];
      const size_t pool = c.block_bytes() * c.num_blocks();
      std::vector<uint8_t> host(c.Row(0, 0, 0, 0), c.Row(0, 0, 0, 0) + pool);
      DevBuf<uint8_t> dpool(host);
      DevBuf<float> dq(q), out(want.size());
      DevBuf<int32_t> dtab(tables), dstart(table_start), dpos(pos);
      ASSERT_EQ(LaunchAttention(View(c, 1, dpool.get(), kv_dim), dq.get(), n, heads, kv_heads, hd,
                                scale, dtab.get(), dstart.get(), dpos.get(), out.get(), nullptr),
                cudaSuccess);
      ExpectClose(out.Download(), want, 1e-4, "attention " + name);
      // Split over the context (decode steps), merged by a second kernel. Contexts of 94..100
      // positions: 1 split of 128 (max 1), 2 of 64 (max 2), 3 or 4 of 32, the last one
      // partial (max 4 and 8); the context of 20: 1 split of 32.
      for (int max_splits : {1, 2, 4, 8}) {
        DevBuf<float> scratch(std::vector<float>(AttentionSplitFloats(n, heads, hd, max_splits))),
            out2(want.size());  // the scratch zeroed, as its counters need
        ASSERT_EQ(LaunchAttention(View(c, 1, dpool.get(), kv_dim), dq.get(), n, heads, kv_heads, hd,
                                  scale, dtab.get(), dstart.get(), dpos.get(), out2.get(), nullptr,
                                  scratch.get(), max_splits),
                  cudaSuccess);
        ExpectClose(out2.Download(), want, 1e-4,
                    "split attention " + name + " max_splits " + std::to_string(max_splits));
        // Its counters are back at zero: a launch of the first token only (the scratch's
        // prefix), then all tokens again (a graph replay), merge alike.
        DevBuf<float> out1(static_cast<size_t>(heads) * hd);
        ASSERT_EQ(LaunchAttention(View(c, 1, dpool.get(), kv_dim), dq.get(), 1, heads, kv_heads, hd,
                                  scale, dtab.get(), dstart.get(), dpos.get(), out1.get(), nullptr,
                                  scratch.get(), max_splits),
                  cudaSuccess);
        ExpectClose(
            out1.Download(),
            std::vector<float>(want.begin(), want.begin() + static_cast<int64_t>(heads) * hd), 1e-4,
            "split attention, first token alone, " + name);
        out2.Poison();
        ASSERT_EQ(LaunchAttention(View(c, 1, dpool.get(), kv_dim), dq.get(), n, heads, kv_heads, hd,
                                  scale, dtab.get(), dstart.get(), dpos.get(), out2.get(), nullptr,
                                  scratch.get(), max_splits),
                  cudaSuccess);
        ExpectClose(out2.Download(), want, 1e-4,
                    "split attention again " + name + " max_splits " + std::to_string(max_splits));
      }
    }
  }
}

// ---- end to end: stories260K on the CUDA backend against the CPU backend ----

TEST(CudaBackendEndToEnd, Stories260KGreedyTextMatchesCpu) {
  REQUIRE_CUDA();
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const Model& m = **model;
  // A prompt of 40 tokens takes the cuBLAS path in prefill; decode takes the GEMV path.
  std::vector<int32_t> prompt = m.tokenizer().Encode(
      "Once upon a time, there was a little girl "
      "named Lily. She loved to play outside in "
      "the park with her friends and",
      true);
  for (KvDtype d : {KvDtype::kF32, KvDtype::kF16, KvDtype::kQ8_0, KvDtype::kFp8E4M3}) {
    for (bool eager : {false, true}) {
      const std::string name =
          std::string(KvDtypeName(d)) + (eager ? ", eager" : ", decode by CUDA graphs");
      EngineConfig cfg = pinfer::testing::SmallConfig(d);
      cfg.max_num_batched_tokens = 64;
      cfg.enforce_eager = eager;
      std::vector<float> cpu_logits, gpu_logits;
      auto cpu = testing::GreedyTokens(m, cfg, prompt, 48, nullptr, &cpu_logits);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      auto backend = MakeCudaBackend(m, cfg.max_num_batched_tokens);
      ASSERT_TRUE(backend.ok()) << backend.status();
      auto gpu = testing::GreedyTokens(m, cfg, prompt, 48, std::move(*backend), &gpu_logits);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      ExpectClose(gpu_logits, cpu_logits, 2e-2, "prompt logits, KV " + name);
      EXPECT_EQ(m.tokenizer().Decode(*gpu), m.tokenizer().Decode(*cpu)) << "KV " << name;
    }
  }
}

// The synthetic "tiny" shape (GQA 8/4 heads, dims multiples of 256) in block types, so that
// the whole pipeline runs the quantized kernels (fused GEMVs, cuBLAS on dequantized tiles).
// First-token logits against the CPU: a one-token prompt (GEMV path, float32 throughout):
// 1e-3; a 40-token prompt (cuBLAS on half inputs): 1e-2 with f16 KV (measured on the CUDA
// emulator: 8e-4), 6e-2 with q4_0 KV, whose 4-bit rounding turns the half-precision
// differences of K and V into whole quantization steps (measured: 1.1% to 3.4%). Decode by
// graphs and eager agree.
TEST(CudaBackendEndToEnd, SyntheticQuantizedModelsMatchCpu) {
  REQUIRE_CUDA();
  for (const char* type : {"Q4_0", "Q8_0", "Q4_K_M"}) {
    const std::string path = testing::TempDir(std::string("cuda-tiny-") + type) + "/tiny.gguf";
    ASSERT_TRUE(WriteSynthModel("tiny", type, path, SynthOptions{3, 2}).ok()) << type;
    auto model = Model::Load(path);
    ASSERT_TRUE(model.ok()) << model.status();
    const Model& m = **model;
    std::vector<int32_t> long_prompt;
    for (int i = 0; i < 40; ++i) long_prompt.push_back(1 + (i * 37) % 500);
    for (const bool long_one : {false, true}) {
      const std::vector<int32_t> prompt = long_one ? long_prompt : std::vector<int32_t>{1};
      for (KvDtype d : {KvDtype::kF16, KvDtype::kQ4_0}) {
        const double tol = !long_one ? 1e-3 : d == KvDtype::kF16 ? 1e-2 : 6e-2;
        const std::string name = std::string(type) + ", KV " + std::string(KvDtypeName(d)) +
                                 ", prompt of " + std::to_string(prompt.size());
        EngineConfig cfg = pinfer::testing::SmallConfig(d);
        cfg.max_num_batched_tokens = 64;
        std::vector<float> cpu_logits, gpu_logits, eager_logits;
        auto cpu = testing::GreedyTokens(m, cfg, prompt, 8, nullptr, &cpu_logits);
        ASSERT_TRUE(cpu.ok()) << name << ": " << cpu.status();
        auto backend = MakeCudaBackend(m, cfg.max_num_batched_tokens);
        ASSERT_TRUE(backend.ok()) << backend.status();
        auto gpu = testing::GreedyTokens(m, cfg, prompt, 8, std::move(*backend), &gpu_logits);
        ASSERT_TRUE(gpu.ok()) << name << ": " << gpu.status();
        ExpectClose(gpu_logits, cpu_logits, tol, "first-token logits, " + name);
        cfg.enforce_eager = true;
        auto backend2 = MakeCudaBackend(m, cfg.max_num_batched_tokens);
        ASSERT_TRUE(backend2.ok()) << backend2.status();
        auto eager = testing::GreedyTokens(m, cfg, prompt, 8, std::move(*backend2), &eager_logits);
        ASSERT_TRUE(eager.ok()) << name << ": " << eager.status();
        EXPECT_EQ(*eager, *gpu) << name << ": eager and graph decode chose different tokens";
      }
    }
  }
}

// ---- CUDA graphs ----

TEST(CudaGraphs, PaddedSizes) {  // no device needed
  using V = std::vector<int>;
  EXPECT_EQ(CudaBackend::GraphSizesFor(1, 512), V({1}));
  EXPECT_EQ(CudaBackend::GraphSizesFor(3, 512), V({1, 2, 3}));
  EXPECT_EQ(CudaBackend::GraphSizesFor(8, 512), V({1, 2, 4, 8}));
  EXPECT_EQ(CudaBackend::GraphSizesFor(40, 512), V({1, 2, 4, 8, 16, 32, 40}));
  EXPECT_EQ(CudaBackend::GraphSizesFor(64, 48), V({1, 2, 4, 8, 16, 32, 48}));
}

struct RunResult {
  std::map<std::pair<int64_t, int>, std::vector<float>> logits;  // every sampled row, in order
  std::vector<int> graph_sizes;
  int64_t replays = 0;
  uint64_t graph_ledger = 0;
  bool report_has_graph_line = false;
  // The backend's step buffers when the engine was created (what the ledger counted) and
  // after every request ran: equal when nothing grew after the KV pool was sized.
  uint64_t workspace_at_create = 0, workspace_at_end = 0, workspace_ledger = 0;
};

// Requests of different lengths at once, so that decode steps shrink through several sizes.
absl::StatusOr<RunResult> RunRequests(const Model& m, EngineConfig cfg, int requests) {
  auto backend = MakeCudaBackend(m, cfg.max_num_batched_tokens);
  if (!backend.ok()) return backend.status();
  auto e = Engine::Create(m, cfg, std::move(*backend), /*quiet=*/true);
  if (!e.ok()) return e.status();
  RunResult r;
  r.workspace_at_create = (*e)->backend().WorkspaceBytes();
  r.workspace_ledger = (*e)->ledger().workspace_bytes;
  (*e)->SetLogitsObserver([&r](int64_t rid, int index, const float* l, int n) {
    auto& v = r.logits[{rid, index}];
    v.insert(v.end(), l, l + n);
  });
  const char* texts[] = {"Once upon a time", "The cat sat", "Lily and Ben went to the park",
                         "One day", "A big red ball"};
  for (int i = 0; i < requests; ++i) {
    GenerationRequest req;
    req.prompt = m.tokenizer().Encode(texts[i % 5], true);
    req.prompt.push_back(1 + i % 7);  // distinct prompts
    req.params.temperature = 0;
    req.params.max_tokens = 3 + (5 * i) % 17;
    req.params.ignore_eos = true;
    auto rid = (*e)->AddRequest(req);
    if (!rid.ok()) return rid.status();
  }
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    if (!step.ok()) return step.status();
  }
  const auto& cb = dynamic_cast<const CudaBackend&>((*e)->backend());
  r.graph_sizes = cb.graph_sizes();
  r.replays = cb.graph_replays();
  r.graph_ledger = (*e)->ledger().graph_bytes;
  r.workspace_at_end = cb.WorkspaceBytes();
  const MemoryReport report = (*e)->memory_report();  // a copy: keep it alive while reading
  for (const StageRecord& st : report.stages()) {
    for (const LineUsage& l : st.lines) r.report_has_graph_line |= l.line == kLineGraphs;
  }
  return r;
}

// Up to 16 tokens a step, graph replay and eager steps run the same kernels on the same rows
// (padding rows never mix with real ones): logits must be bit-identical, step after step.
// Above 16 (cuBLAS, whose kernels may differ with the padded width): 1e-4 relative.
TEST(CudaGraphs, ReplayMatchesEagerLogits) {
  REQUIRE_CUDA();
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  struct Case {
    int max_num_seqs, requests;
    bool exact;
  };
  for (const Case& k : {Case{8, 6, true}, Case{24, 20, false}}) {
    for (KvDtype d : {KvDtype::kF16, KvDtype::kQ8_0}) {
      const std::string name = std::string(KvDtypeName(d)) + ", " + std::to_string(k.requests) +
                               " requests, max_num_seqs " + std::to_string(k.max_num_seqs);
      EngineConfig cfg = pinfer::testing::SmallConfig(d);
      cfg.max_num_seqs = k.max_num_seqs;
      cfg.max_num_batched_tokens = 128;
      cfg.kv_cache_memory = 16ull << 20;
      auto graphs = RunRequests(**model, cfg, k.requests);
      ASSERT_TRUE(graphs.ok()) << name << ": " << graphs.status();
      cfg.enforce_eager = true;
      auto eager = RunRequests(**model, cfg, k.requests);
      ASSERT_TRUE(eager.ok()) << name << ": " << eager.status();
      EXPECT_EQ(graphs->graph_sizes, CudaBackend::GraphSizesFor(k.max_num_seqs, 128)) << name;
      EXPECT_GT(graphs->replays, 0) << name << ": no step replayed a graph";
      EXPECT_GT(graphs->graph_ledger, 0u) << name;
      EXPECT_TRUE(graphs->report_has_graph_line) << name << ": no 'cuda graphs' report line";
      for (const RunResult* r : {&*graphs, &*eager}) {
        EXPECT_EQ(r->workspace_at_end, r->workspace_at_create)
            << name << ": device buffers grew after the KV pool was sized";
        EXPECT_GE(r->workspace_ledger, r->workspace_at_create) << name;
      }
      EXPECT_TRUE(eager->graph_sizes.empty()) << name;
      EXPECT_EQ(eager->replays, 0) << name;
      EXPECT_EQ(eager->graph_ledger, 0u) << name;
      EXPECT_FALSE(eager->report_has_graph_line) << name;
      ASSERT_EQ(graphs->logits.size(), eager->logits.size()) << name;
      for (const auto& [key, want] : eager->logits) {
        const std::vector<float>& got = graphs->logits[key];
        const std::string what = name + ", request " + std::to_string(key.first);
        ASSERT_EQ(got.size(), want.size()) << what;
        if (k.exact) {
          size_t first_diff = got.size();
          for (size_t i = 0; i < got.size() && first_diff == got.size(); ++i) {
            if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) first_diff = i;
          }
          EXPECT_EQ(first_diff, got.size())
              << what << ": logits differ first at value " << first_diff << " (step "
              << first_diff / static_cast<size_t>((*model)->config().n_vocab) << ")";
        } else {
          ExpectClose(got, want, 1e-4, what);
        }
      }
    }
  }
}

// Device logits hold one row per sequence once ReserveForLimits knows max_num_seqs: a step
// that wants more is refused with a message (the engine never asks for more).
TEST(CudaBackendEndToEnd, LogitRowsFollowMaxNumSeqs) {
  REQUIRE_CUDA();
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& mc = (*model)->config();
  auto b = CudaBackend::Create(**model, 64);
  ASSERT_TRUE(b.ok()) << b.status();
  const uint64_t before = (*b)->WorkspaceBytes();
  ASSERT_TRUE((*b)->ReserveForLimits(2, 64, 16).ok());
  EXPECT_EQ(before - (*b)->WorkspaceBytes(), 62ull * mc.n_vocab * sizeof(float))
      << "64 rows of logits become 2";
  KvCacheConfig kc;
  kc.n_layers = mc.n_layers;
  kc.n_kv_heads = mc.n_kv_heads;
  kc.head_dim = mc.head_dim;
  kc.block_size = 16;
  kc.max_model_len = 64;
  kc.max_num_seqs = 2;
  kc.num_blocks = 8;
  kc.prefix_caching = false;
  auto host = KvCache::Create(kc);  // for its block size in bytes
  ASSERT_TRUE(host.ok()) << host.status();
  auto storage = (*b)->MakeKvStorage((*host)->block_bytes(), kc.num_blocks);
  ASSERT_TRUE(storage.ok()) << storage.status();
  auto cache = KvCache::Create(kc, std::move(*storage));
  ASSERT_TRUE(cache.ok()) << cache.status();
  ASSERT_TRUE((*cache)->AddSequence(1).ok());
  ASSERT_TRUE((*cache)->Append(1, 3).ok());
  std::vector<float> logits(3 * static_cast<size_t>(mc.n_vocab));
  ForwardBatch two, three;
  for (int p = 0; p < 3; ++p) {
    two.Add(p + 1, p, 1, p >= 1);
    three.Add(p + 1, p, 1, true);
  }
  EXPECT_TRUE((*b)->Forward(two, **cache, logits.data()).ok());
  const absl::Status s = (*b)->Forward(three, **cache, logits.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("logits for 3 rows"), std::string::npos) << s;
  cache->reset();  // before the backend that made its storage
}

TEST(CudaBackendEndToEnd, NoDeviceMessageNamesTheReason) {
  const absl::Status s = CudaDeviceStatus();
  if (s.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_NE(std::string(s.message()).find("no CUDA device: "), std::string::npos) << s;
}

}  // namespace
}  // namespace pinfer::cuda
