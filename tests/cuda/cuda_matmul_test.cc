// The CUDA weight kernels against the CPU reference on seeded random non-zero data: the
// embedding and the cuBLAS activation conversion, Y = X W^T in every storage type (GEMV and
// cuBLAS paths, act-order permutations, graph capture), the GEMV's lanes run on the host,
// and the fused GEMV launches. Output buffers are filled with NaN (bytes 0xFF) before each
// launch, so an element a kernel fails to write shows up. Every test that needs a device
// skips, saying why, without one.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/device_matmul.h"
#include "cuda/gemv_groups.cuh"
#include "cuda/gemv_units.cuh"
#include "cuda/kernels.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "gtest/gtest.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"
#include "tests/cuda/cuda_test_support.h"

namespace pinfer::cuda {
namespace {

// The CPU reference MatMul, with a workspace sized for the call, on its float path (the CUDA
// kernels take float activations; the CPU's default 8-bit ones would differ by more than the
// tolerances below, which measure the CUDA kernels' rounding).
void ReferenceMatMul(const WeightMatrix& w, const float* x, int n, float* y, ThreadPool& pool) {
  auto ws = CpuWorkspace::ForMatMul(w.cols, n, pool.size());
  ASSERT_TRUE(ws.ok()) << ws.status();
  ASSERT_TRUE(MatMul(w, x, n, y, pool, **ws, {.float_activations = true}).ok());
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
  m.w = MatrixView("test", t, rows, cols, m.bytes.data());
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
        ReferenceMatMul(m.w, x.data(), n, want.data(), pool);
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
  ReferenceMatMul(m.w, x.data(), n, want.data(), pool);
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
    ReferenceMatMul(m.w, x.data(), n, want.data(), pool);
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
    ReferenceMatMul(m.w, x.data(), n, want.data(), pool);
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
          ReferenceMatMul(m.w, x.data(), n, want.data(), pool);
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
      ReferenceMatMul(mq.w, x.data(), n, wq.data(), pool);
      ReferenceMatMul(mk.w, x.data(), n, wk.data(), pool);
      ReferenceMatMul(mv.w, x.data(), n, wv.data(), pool);
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

}  // namespace
}  // namespace pinfer::cuda
