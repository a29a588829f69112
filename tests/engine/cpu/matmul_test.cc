// MatMul's batch invariance: for every storage type, a batch of T tokens (with and without an
// act-order input permutation) gives each token exactly the floats it gets alone, and those
// floats are the dot of the dequantized weights within the DotRow bound (float path) or within
// the activation rounding's bound (8-bit activations, quants_q8a.h). Both paths are checked.
#include "engine/cpu/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/repack.h"
#include "gtest/gtest.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

struct OwnedMatrix {
  std::vector<uint8_t> data;
  std::vector<float> dequantized;  // [rows x cols], in the stored column order
  WeightMatrix w;
};

OwnedMatrix RandomMatrix(GgmlType t, int64_t rows, int64_t cols, bool permuted, uint32_t seed) {
  OwnedMatrix m;
  m.data.resize(GgmlRowBytes(t, cols) * rows);
  m.w = MatrixView("test", t, rows, cols, m.data.data());
  m.dequantized.resize(static_cast<size_t>(rows * cols));
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.5f);
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = gauss(rng) + 0.1f;  // an offset, so Q4_1 / K-quant mins matter
    QuantizeRow(t, row.data(), m.data.data() + r * m.w.row_bytes, cols);
    DequantizeRow(t, m.data.data() + r * m.w.row_bytes, m.dequantized.data() + r * cols, cols);
  }
  if (permuted) {
    m.w.input_perm.resize(cols);
    std::iota(m.w.input_perm.begin(), m.w.input_perm.end(), 0);
    std::shuffle(m.w.input_perm.begin(), m.w.input_perm.end(), rng);
  }
  return m;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

void CheckType(GgmlType t, int64_t cols, bool permuted, ThreadPool& pool,
               const MatMulOptions& o = {}) {
  constexpr int64_t kRows = 37;  // two whole 16-row tiles and a partial one
  constexpr int kMaxTokens = 33;
  const OwnedMatrix m = RandomMatrix(t, kRows, cols, permuted, 5 + static_cast<uint32_t>(cols));
  const char* name = GgmlTypeInfoOf(t).name.data();
  std::mt19937 rng(11);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kMaxTokens * cols));
  for (float& v : x) v = gauss(rng);
  auto ws = CpuWorkspace::ForMatMul(cols, kMaxTokens, pool.size());
  ASSERT_TRUE(ws.ok()) << ws.status();

  // Each token alone, and its float64 reference.
  std::vector<float> alone(static_cast<size_t>(kMaxTokens * kRows));
  for (int tok = 0; tok < kMaxTokens; ++tok) {
    const float* xt = x.data() + tok * cols;
    ASSERT_TRUE(MatMul(m.w, xt, 1, alone.data() + tok * kRows, pool, **ws, o).ok());
    for (int64_t r = 0; r < kRows; ++r) {
      // The activations' blocks: the weight format's (32 values, or 256 for the K-quants).
      const int64_t ab = std::max<int64_t>(GgmlTypeInfoOf(t).block_size, 32);
      double ref = 0, l1 = 0, act_rounding = 0;
      for (int64_t b = 0; b < cols / ab; ++b) {  // per activation block: amax and sum |w|
        double amax = 0, wsum = 0;
        for (int64_t k = ab * b; k < ab * b + ab; ++k) {
          const double xk = xt[permuted ? m.w.input_perm[k] : k];
          const double wx = double(m.dequantized[r * cols + k]) * xk;
          ref += wx;
          l1 += std::fabs(wx);
          amax = std::max(amax, std::fabs(xk));
          wsum += std::fabs(double(m.dequantized[r * cols + k]));
        }
        act_rounding += amax / 127.0 / 2.0 * wsum;
      }
      for (int64_t k = cols / ab * ab; k < cols; ++k) {
        const double wx =
            double(m.dequantized[r * cols + k]) * xt[permuted ? m.w.input_perm[k] : k];
        ref += wx;
        l1 += std::fabs(wx);
      }
      const double bound = 1e-5 * l1 + (MatMulInt8Activations(t, o) ? act_rounding : 0.0);
      ASSERT_LE(std::fabs(alone[tok * kRows + r] - ref), bound)
          << name << " cols " << cols << " token " << tok << " row " << r;
    }
  }
  // Every batch size over the same tokens, starting at two different offsets.
  std::vector<float> y(static_cast<size_t>((kMaxTokens + 1) * kRows));
  for (int n = 1; n <= kMaxTokens; ++n) {
    for (int first : {0, kMaxTokens - n}) {
      std::fill(y.begin(), y.end(), -7.0f);
      ASSERT_TRUE(MatMul(m.w, x.data() + first * cols, n, y.data(), pool, **ws, o).ok());
      for (int tok = 0; tok < n; ++tok) {
        for (int64_t r = 0; r < kRows; ++r) {
          ASSERT_TRUE(SameBits(y[tok * kRows + r], alone[(first + tok) * kRows + r]))
              << name << " cols " << cols << (permuted ? " permuted" : "") << " batch " << n
              << " token " << tok << " row " << r << ": " << y[tok * kRows + r] << " vs "
              << alone[(first + tok) * kRows + r];
        }
      }
      ASSERT_EQ(y[n * kRows], -7.0f) << "wrote past the batch";
    }
  }
}

constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                               GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                               GgmlType::kF16,  GgmlType::kBF16, GgmlType::kF32};

TEST(MatMul, BatchesGiveEachTokenItsSingleTokenResultBitForBit) {
  ThreadPool pool(2);
  for (GgmlType t : kTypes) {
    const int64_t bs = GgmlTypeInfoOf(t).block_size;
    for (int64_t cols :
         bs > 1 ? std::vector<int64_t>{2 * 256, 3 * 256} : std::vector<int64_t>{512, 100, 45}) {
      if (cols % bs != 0) continue;
      CheckType(t, cols, /*permuted=*/false, pool);
    }
  }
}

TEST(MatMul, TheFloatPathOfTheIntegerFormatsStaysBatchInvariant) {
  ThreadPool pool(2);
  for (GgmlType t : kTypes) {
    if (!MatMulInt8Activations(t)) continue;
    EXPECT_FALSE(MatMulInt8Activations(t, {.float_activations = true}));
    CheckType(t, 256, /*permuted=*/false, pool, {.float_activations = true});
  }
}

TEST(MatMul, PermutedInputsStayBatchInvariant) {
  ThreadPool pool(3);
  for (GgmlType t : kTypes) {
    const int64_t bs = GgmlTypeInfoOf(t).block_size;
    CheckType(t, bs > 1 ? 512 : 100, /*permuted=*/true, pool);
  }
}

TEST(MatMul, ThreadCountDoesNotChangeResults) {
  const OwnedMatrix m = RandomMatrix(GgmlType::kQ4_K, 70, 512, false, 3);
  std::vector<float> x(9 * 512);
  std::mt19937 rng(1);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  std::vector<float> y1(9 * 70), y4(9 * 70);
  ThreadPool one(1), four(4);
  auto ws = CpuWorkspace::ForMatMul(512, 9, 4);
  ASSERT_TRUE(ws.ok()) << ws.status();
  ASSERT_TRUE(MatMul(m.w, x.data(), 9, y1.data(), one, **ws).ok());
  ASSERT_TRUE(MatMul(m.w, x.data(), 9, y4.data(), four, **ws).ok());
  ASSERT_EQ(std::memcmp(y1.data(), y4.data(), y1.size() * sizeof(float)), 0);
}

// A matrix repacked into 8-row groups (w.packed, engine/cpu/repack.h) takes the packed kernel
// and gives every token the floats of the file's layout bit for bit (Q4_0, Q4_1, Q8_0 and the
// K-quants, where the set has their packed kernels: both follow the row dots' per-block order),
// whatever the batch and the threads: rows not a multiple of 8 (a padded last group), 1, 2 and 19
// tokens, 1 and 2 threads, with an input permutation too.
TEST(MatMul, PackedMatricesGiveTheFileLayoutsFloatsBitForBit) {
  constexpr int64_t kRows = 45, kCols = 256;
  constexpr int kMaxTokens = 19;
  int checked = 0;
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K,
                     GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const PackedKernel k = PackedKernelFor(ActiveKernelSet(), t);
    if (k.dot == nullptr) continue;
    for (bool permuted : {false, true}) {
      OwnedMatrix m = RandomMatrix(t, kRows, kCols, permuted, 21);
      std::vector<uint8_t> packed(k.bytes(t, kRows, kCols));
      k.pack(t, m.data.data(), m.w.row_bytes, kRows, kCols, packed.data());
      WeightMatrix pw = m.w;
      pw.packed = packed.data();
      std::vector<float> x(kMaxTokens * kCols);
      std::mt19937 rng(4);
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      for (float& v : x) v = gauss(rng);
      // Every token alone on one thread: the reference of the packed path.
      std::vector<float> alone(kMaxTokens * kRows);
      {
        ThreadPool one(1);
        auto ws = CpuWorkspace::ForMatMul(kCols, 1, 1);
        ASSERT_TRUE(ws.ok()) << ws.status();
        for (int tok = 0; tok < kMaxTokens; ++tok) {
          ASSERT_TRUE(
              MatMul(pw, x.data() + tok * kCols, 1, alone.data() + tok * kRows, one, **ws).ok());
        }
      }
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        auto ws = CpuWorkspace::ForMatMul(kCols, kMaxTokens, threads);
        ASSERT_TRUE(ws.ok()) << ws.status();
        for (int n : {1, 2, kMaxTokens}) {
          std::vector<float> want(n * kRows, -1.0f), got(n * kRows, -2.0f);
          ASSERT_TRUE(MatMul(m.w, x.data(), n, want.data(), pool, **ws).ok());
          ASSERT_TRUE(MatMul(pw, x.data(), n, got.data(), pool, **ws).ok());
          for (size_t i = 0; i < want.size(); ++i) {
            auto where = [&] {
              return absl::StrCat(std::string(GgmlTypeInfoOf(t).name), permuted ? " permuted" : "",
                                  " threads ", threads, " tokens ", n, " token ", i / kRows,
                                  " row ", i % kRows, ": ", want[i], " vs ", got[i]);
            };
            ASSERT_TRUE(SameBits(alone[i], got[i])) << where() << " (alone " << alone[i] << ")";
            ASSERT_TRUE(SameBits(want[i], got[i])) << where();
          }
          ++checked;
        }
      }
    }
  }
  if (checked == 0) {
    GTEST_SKIP() << "the kernel set " << KernelSetName(ActiveKernelSet())
                 << " has no packed kernels";
  }
}

// The workspace is the only scratch: one too small for the batch, the matrix or the threads
// is refused, naming the line, and y is left alone.
TEST(MatMul, RefusesAWorkspaceTooSmall) {
  const OwnedMatrix m = RandomMatrix(GgmlType::kQ8_0, 20, 256, false, 3);
  std::vector<float> x(4 * 256, 0.5f), y(4 * 20, -7.0f);
  ThreadPool two(2);
  for (auto [cols, tokens, threads] : {std::tuple{256, 3, 2}, {128, 4, 2}, {256, 4, 1}}) {
    auto ws = CpuWorkspace::ForMatMul(cols, tokens, threads);
    ASSERT_TRUE(ws.ok()) << ws.status();
    const absl::Status s = MatMul(m.w, x.data(), 4, y.data(), two, **ws);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << cols << " " << tokens;
    EXPECT_NE(s.message().find("workspace"), std::string_view::npos) << s.message();
    EXPECT_EQ(y[0], -7.0f);
  }
  auto fits = CpuWorkspace::ForMatMul(256, 4, 2);
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(MatMul(m.w, x.data(), 4, y.data(), two, **fits).ok());
}

}  // namespace
}  // namespace pinfer
