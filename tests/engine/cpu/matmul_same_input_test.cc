// MatMulSameInput (engine/cpu/matmul.h): every y element of every matrix bit for bit what
// MatMul of that matrix alone gives, for file-layout and repacked weights, several formats
// (8-bit and float paths), same-format and mixed-format sets (Q4_K with Q6_K, as a Q4_K_M
// file's Q/K/V), matrices of different heights, with and without an input permutation, 1, 2, 7
// and 19 tokens, 1 to 3 threads; and the workspace check before any output is written.
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/repack.h"
#include "gtest/gtest.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

constexpr int64_t kCols = 512;
constexpr int kMaxTokens = 19;

struct Matrix {
  std::vector<uint8_t> data, packed;
  WeightMatrix w;
};

// A random matrix of type t, repacked for the active kernel set when `packed` and it has a
// packed kernel for t (then w.packed is set).
Matrix MakeMatrix(GgmlType t, int64_t rows, bool packed, bool permuted, uint32_t seed) {
  Matrix m;
  m.data.resize(GgmlRowBytes(t, kCols) * rows);
  m.w = MatrixView("test", t, rows, kCols, m.data.data());
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 0.5f);
  std::vector<float> row(kCols);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = gauss(rng) + 0.1f;
    QuantizeRow(t, row.data(), m.data.data() + r * m.w.row_bytes, kCols);
  }
  if (permuted) {
    m.w.input_perm.resize(kCols);
    std::iota(m.w.input_perm.begin(), m.w.input_perm.end(), 0);
    std::shuffle(m.w.input_perm.begin(), m.w.input_perm.end(), rng);
  }
  const PackedKernel k = PackedKernelFor(ActiveKernelSet(), t);
  if (packed && k.dot != nullptr) {
    m.packed.resize(static_cast<size_t>(k.bytes(t, rows, kCols)));
    k.pack(t, m.data.data(), static_cast<int64_t>(m.w.row_bytes), rows, kCols, m.packed.data());
    m.w.packed = m.packed.data();
  }
  return m;
}

void CheckSet(const std::vector<GgmlType>& types, bool packed, bool permuted) {
  const int64_t heights[] = {45, 16, 37, 8};  // partial 8-row groups and 16-row tiles
  std::vector<Matrix> mats;
  for (size_t i = 0; i < types.size(); ++i) {
    mats.push_back(
        MakeMatrix(types[i], heights[i], packed, permuted && i != 1, 7 + static_cast<uint32_t>(i)));
  }
  std::vector<float> x(kMaxTokens * kCols);
  std::mt19937 rng(3);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (float& v : x) v = gauss(rng);
  std::string label;
  for (GgmlType t : types) absl::StrAppend(&label, std::string(GgmlTypeInfoOf(t).name), " ");
  absl::StrAppend(&label, packed ? "packed" : "file layout", permuted ? " permuted" : "");
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    auto ws = CpuWorkspace::ForMatMul(kCols, kMaxTokens, threads);
    ASSERT_TRUE(ws.ok()) << ws.status();
    for (int n : {1, 2, 7, kMaxTokens}) {
      std::vector<std::vector<float>> alone(mats.size()), fused(mats.size());
      std::vector<MatMulTarget> targets;
      for (size_t i = 0; i < mats.size(); ++i) {
        alone[i].assign(static_cast<size_t>(n * mats[i].w.rows), -1.0f);
        fused[i].assign(alone[i].size(), -2.0f);
        ASSERT_TRUE(MatMul(mats[i].w, x.data(), n, alone[i].data(), pool, **ws).ok());
        targets.push_back({&mats[i].w, fused[i].data()});
      }
      ASSERT_TRUE(MatMulSameInput(targets, x.data(), n, pool, **ws).ok());
      for (size_t i = 0; i < mats.size(); ++i) {
        for (size_t e = 0; e < alone[i].size(); ++e) {
          ASSERT_EQ(std::memcmp(&alone[i][e], &fused[i][e], sizeof(float)), 0)
              << label << ", threads " << threads << ", tokens " << n << ", matrix " << i
              << ", token " << e / mats[i].w.rows << " row " << e % mats[i].w.rows << ": "
              << alone[i][e] << " alone vs " << fused[i][e];
        }
      }
    }
  }
}

TEST(MatMulSameInput, EachOutputIsMatMulAloneBitForBit) {
  for (bool packed : {false, true}) {
    for (GgmlType t :
         {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16}) {
      CheckSet({t, t, t}, packed, false);  // Q, K, V
      CheckSet({t, t}, packed, true);      // gate, up; one permuted, one not
      if (HasFatalFailure()) return;
    }
    // Mixed formats: a Q4_K_M file's Q4_K Q/K with a Q6_K V (one Q8_K set), Q4_0 with Q8_0
    // (one Q8A set), and an 8-bit format with a float one (each alone).
    CheckSet({GgmlType::kQ4_K, GgmlType::kQ4_K, GgmlType::kQ6_K}, packed, false);
    CheckSet({GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}, packed, true);
    CheckSet({GgmlType::kQ8_0, GgmlType::kF16}, packed, false);
    if (HasFatalFailure()) return;
  }
}

// A workspace too small for one of the matrices is refused before any output is written.
TEST(MatMulSameInput, RefusesAWorkspaceTooSmallBeforeWriting) {
  Matrix a = MakeMatrix(GgmlType::kQ8_0, 16, false, false, 1);
  Matrix b = MakeMatrix(GgmlType::kQ8_0, 16, false, false, 2);
  std::vector<float> x(4 * kCols, 0.5f), ya(4 * 16, -7.0f), yb(4 * 16, -7.0f);
  ThreadPool two(2);
  auto ws = CpuWorkspace::ForMatMul(kCols, 3, 2);
  ASSERT_TRUE(ws.ok()) << ws.status();
  const MatMulTarget targets[] = {{&a.w, ya.data()}, {&b.w, yb.data()}};
  const absl::Status s = MatMulSameInput(targets, x.data(), 4, two, **ws);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("workspace"), std::string_view::npos) << s.message();
  EXPECT_EQ(ya[0], -7.0f);
  EXPECT_EQ(yb[0], -7.0f);
}

}  // namespace
}  // namespace pinfer
