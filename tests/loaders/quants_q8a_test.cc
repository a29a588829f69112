// The integer kernels of quants_q8a.h: every set this CPU runs against the scalar reference's
// activation bytes and against the header's row-dot contract written out here (the same float
// results, bit for bit, since the header fixes every rounding and the integer sums are exact),
// against the float64 dot of the dequantized weights with the float activations (within the
// activation rounding's bound, figures below), and batch invariance (a token's result alone is its
// result at any place in a batch of 7).
#include "loaders/quants_q8a.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/fp16.h"

namespace pinfer::quants {
namespace {

// Half precision's relative rounding bound (a stored activation scale is within it of amax / 127).
constexpr double kHalfEps = 1.0 / 2048;
constexpr GgmlType kTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                               GgmlType::kQ8_0};

std::vector<KernelSet> Sets() {
  std::vector<KernelSet> sets;
  for (KernelSet s : kAllKernelSets) {
    if (KernelSetRuns(s)) sets.push_back(s);
  }
  return sets;
}

// A row of n values of type t from random bytes, every fp16 scale / min finite and moderate
// (so every code, fifth-bit pattern and Q8_0 byte, -128 included, is reached).
std::vector<uint8_t> RandomRow(GgmlType t, int64_t n, uint32_t seed) {
  std::vector<uint8_t> row(GgmlRowBytes(t, n));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
  const size_t bytes = GgmlTypeInfoOf(t).block_bytes;
  const bool has_min = t == GgmlType::kQ4_1 || t == GgmlType::kQ5_1;
  for (size_t off = 0; off < row.size(); off += bytes) {
    for (size_t f = 0; f < (has_min ? 2u : 1u); ++f) {
      const uint16_t h = Fp32ToFp16(scale(rng));
      std::memcpy(row.data() + off + 2 * f, &h, 2);
    }
  }
  return row;
}

// Token rows: Gaussian, with a few large values (outliers widen a block's scale).
std::vector<float> Activations(int n_tok, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tok * n));
  for (float& v : x) v = gauss(rng);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 8.0f;
  return x;
}

std::vector<uint8_t> Quantized(const Q8AKernels& k, const std::vector<float>& x, int n_tok,
                               int64_t n) {
  std::vector<uint8_t> a(static_cast<size_t>(n_tok * Q8ARowBytes(n)));
  for (int t = 0; t < n_tok; ++t) k.quantize(x.data() + t * n, a.data() + t * Q8ARowBytes(n), n);
  return a;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(QuantsQ8A, EverySetQuantizesActivationsToTheScalarBytes) {
  const Q8AKernels& ref = ScalarQ8AKernels();
  for (int64_t n : {32, 96, 4096}) {
    std::vector<float> x = Activations(3, n, 5 + static_cast<uint32_t>(n));
    std::fill(x.begin(), x.begin() + 32, 0.0f);  // an all-zero block: d = 0, codes 0
    x[40] = -3.0f;                               // exact halves and ties
    const std::vector<uint8_t> want = Quantized(ref, x, 3, n);
    for (int64_t b = 0; b < 3 * n / kQK8A; ++b) {
      BlockQ8A blk;
      std::memcpy(&blk, want.data() + b * sizeof(BlockQ8A), sizeof blk);
      int sum = 0;
      for (int8_t q : blk.qs) {
        ASSERT_LE(std::abs(q), 127);
        sum += q;
      }
      ASSERT_EQ(sum, blk.sum);
    }
    for (KernelSet s : Sets()) {
      ASSERT_EQ(Quantized(Q8AKernelsFor(s), x, 3, n), want) << KernelSetName(s) << " n=" << n;
    }
  }
}

// The stored scale is amax / 127 rounded to the nearest half-precision value inside half's
// normal range (llama.cpp's q8_0 / q8_1 scales), and amax / 127 itself outside it.
TEST(QuantsQ8A, StoredScaleIsHalfPrecisionInItsNormalRange) {
  // Block amaxes: ordinary, one whose amax / 127 is not a half, below half's normal range,
  // above half's largest value.
  const float amaxes[] = {3.0f, 1.2345678f, 1e-3f, 1e7f};
  std::vector<float> x(32 * 4);
  for (int b = 0; b < 4; ++b) {
    for (int j = 0; j < 32; ++j) x[32 * b + j] = amaxes[b] * ((j % 7) - 3) / 3.0f;
  }
  for (KernelSet s : Sets()) {
    const std::vector<uint8_t> a = Quantized(Q8AKernelsFor(s), x, 1, 128);
    for (int b = 0; b < 4; ++b) {
      BlockQ8A blk;
      std::memcpy(&blk, a.data() + b * sizeof(BlockQ8A), sizeof blk);
      const float d = amaxes[b] / 127.0f;
      const bool normal_half = d >= kQ8AHalfMin && d <= kQ8AHalfMax;
      EXPECT_EQ(normal_half, b < 2) << "block " << b;
      const float want = normal_half ? Fp16ToFp32(Fp32ToFp16(d)) : d;
      EXPECT_TRUE(SameBits(blk.d, want))
          << KernelSetName(s) << " block " << b << ": " << blk.d << " want " << want;
      if (b == 1) {
        EXPECT_NE(blk.d, d) << "amax / 127 was meant not to be a half";
      }
      EXPECT_EQ(blk.qs[0], -127) << KernelSetName(s) << " block " << b;  // codes from d itself
    }
  }
}

// quants_q8a.h's row dot, written from its contract text on the raw GGML block bytes (d, then m
// for Q4_1 / Q5_1, then qh for Q5_0 / Q5_1, then the codes), independent of the kernels: per
// block the exact integer i_b (with Q4_0's 8 sum_a and Q5_0's 16 sum_a folded in), then
// acc = fma(d_w * d_a, float(i_b), acc) and, for Q4_1 / Q5_1, acc = fma(m_w * d_a,
// float(sum_a), acc), from +0 in row order.
float ContractDot(GgmlType t, const uint8_t* w, const BlockQ8A* a, int64_t n) {
  const size_t bytes = GgmlTypeInfoOf(t).block_bytes;
  const bool has_min = t == GgmlType::kQ4_1 || t == GgmlType::kQ5_1;
  const bool five = t == GgmlType::kQ5_0 || t == GgmlType::kQ5_1;
  float acc = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* blk = w + b * bytes;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const float d = Fp16ToFp32(h);
    std::memcpy(&h, blk + 2, 2);
    const float m = has_min ? Fp16ToFp32(h) : 0.0f;
    const uint8_t* p = blk + (has_min ? 4 : 2);
    uint32_t qh = 0;
    if (five) {
      std::memcpy(&qh, p, 4);
      p += 4;
    }
    int32_t i = 0;
    for (int j = 0; j < 32; ++j) {
      int q;
      if (t == GgmlType::kQ8_0) {
        q = static_cast<int8_t>(p[j]);
      } else {
        q = j < 16 ? (p[j] & 0x0f) : (p[j - 16] >> 4);
        if (five) q |= static_cast<int>((qh >> j) & 1) << 4;
      }
      i += q * a[b].qs[j];
    }
    if (t == GgmlType::kQ4_0) i -= 8 * a[b].sum;
    if (t == GgmlType::kQ5_0) i -= 16 * a[b].sum;
    acc = std::fma(d * a[b].d, static_cast<float>(i), acc);
    if (has_min) acc = std::fma(m * a[b].d, static_cast<float>(a[b].sum), acc);
  }
  return acc;
}

// Every set (the scalar one included) against ContractDot, bit for bit: random rows (every
// code, nonzero scales and mins), edge lengths (one block; two; 129 blocks, past a multiple of
// 8), every token count 1..7, outputs at a stride of 3 (nothing written between them).
TEST(QuantsQ8A, EverySetMatchesTheContractBitForBit) {
  for (GgmlType t : kTypes) {
    for (int64_t n : {32, 64, 160, 4096 + 32}) {
      const int rows = 3;
      const std::vector<float> x = Activations(7, n, 9 + static_cast<uint32_t>(n));
      const std::vector<uint8_t> a = Quantized(ScalarQ8AKernels(), x, 7, n);
      for (int r = 0; r < rows; ++r) {
        const std::vector<uint8_t> w = RandomRow(t, n, 31 * r + static_cast<uint32_t>(n));
        std::vector<float> want(7);
        int nonzero = 0;
        for (int k = 0; k < 7; ++k) {
          const auto* ak = reinterpret_cast<const BlockQ8A*>(a.data() + k * Q8ARowBytes(n));
          want[k] = ContractDot(t, w.data(), ak, n);
          nonzero += want[k] != 0.0f;
        }
        ASSERT_EQ(nonzero, 7) << "the data was meant to give nonzero dots";
        for (KernelSet s : Sets()) {
          for (int n_tok = 1; n_tok <= 7; ++n_tok) {
            std::vector<float> got(3 * n_tok, -1.0f);
            Q8ARowDot(Q8AKernelsFor(s), t)(w.data(), a.data(), Q8ARowBytes(n), n_tok, n, got.data(),
                                           3);
            for (int k = 0; k < n_tok; ++k) {
              ASSERT_TRUE(SameBits(got[3 * k], want[k]))
                  << KernelSetName(s) << " " << GgmlTypeInfoOf(t).name << " n=" << n
                  << " n_tok=" << n_tok << " token " << k << ": " << got[3 * k] << " vs "
                  << want[k];
              ASSERT_EQ(got[3 * k + 1], -1.0f) << "wrote between strided outputs";
              ASSERT_EQ(got[3 * k + 2], -1.0f) << "wrote between strided outputs";
            }
          }
        }
      }
    }
  }
}

// Against the float64 dot of DequantizeRow(w) with the float activations x. The activation
// codes round each x_j by at most d_a / 2 (d_a = the block's amax / 127), and the stored
// half-precision scale d_a (1 + e), |e| <= 2^-11, moves each d_a q_j by at most 2^-11 (|x_j| +
// d_a / 2), so
//   |y - ref| <= sum_b (1 + 2^-11) (d_a,b / 2) sum_{j in b} |w_j| + (2^-11 + 1e-5) sum_j |w_j x_j|
// (the last 1e-5 for the float sums) always; measured, the error is a few percent of that bound
// (random rounding errors cancel): the test prints the largest ratio and the median relative error
// |y - ref| / sum |w_j x_j|.
TEST(QuantsQ8A, WithinTheActivationRoundingOfTheFloatDot) {
  for (GgmlType t : kTypes) {
    const int64_t n = 4096;
    const int n_tok = 4;
    const std::vector<float> x = Activations(n_tok, n, 77);
    const Q8AKernels& k = Q8AKernelsFor(ActiveKernelSet());
    const std::vector<uint8_t> a = Quantized(k, x, n_tok, n);
    double worst_ratio = 0;
    std::vector<double> rel;
    for (int r = 0; r < 16; ++r) {
      const std::vector<uint8_t> w = RandomRow(t, n, 1000 + r);
      std::vector<float> deq(n), y(n_tok);
      DequantizeRow(t, w.data(), deq.data(), n);
      Q8ARowDot(k, t)(w.data(), a.data(), Q8ARowBytes(n), n_tok, n, y.data(), 1);
      for (int tok = 0; tok < n_tok; ++tok) {
        const float* xt = x.data() + tok * n;
        double ref = 0, l1 = 0, bound = 0;
        for (int64_t b = 0; b < n / 32; ++b) {
          double amax = 0, wsum = 0;
          for (int j = 0; j < 32; ++j) {
            const int64_t i = 32 * b + j;
            ref += double(deq[i]) * xt[i];
            l1 += std::fabs(double(deq[i]) * xt[i]);
            amax = std::max(amax, std::fabs(double(xt[i])));
            wsum += std::fabs(double(deq[i]));
          }
          bound += (1.0 + kHalfEps) * amax / 127.0 / 2.0 * wsum;
        }
        bound += (kHalfEps + 1e-5) * l1;
        const double err = std::fabs(y[tok] - ref);
        ASSERT_LE(err, bound) << GgmlTypeInfoOf(t).name << " row " << r << " token " << tok;
        worst_ratio = std::max(worst_ratio, err / bound);
        rel.push_back(err / l1);
      }
    }
    std::sort(rel.begin(), rel.end());
    std::printf("%s: largest error / bound %.3f, median |y - ref| / sum|w x| %.2e\n",
                std::string(GgmlTypeInfoOf(t).name).c_str(), worst_ratio, rel[rel.size() / 2]);
  }
}

TEST(QuantsQ8A, ATokensResultIsTheSameAloneOrInABatchOfSeven) {
  for (KernelSet s : Sets()) {
    const Q8AKernels& k = Q8AKernelsFor(s);
    for (GgmlType t : kTypes) {
      const int64_t n = 512 + 32;
      const std::vector<float> x = Activations(7, n, 3);
      const std::vector<uint8_t> a = Quantized(k, x, 7, n);
      const std::vector<uint8_t> w = RandomRow(t, n, 8);
      std::vector<float> batch(7);
      Q8ARowDot(k, t)(w.data(), a.data(), Q8ARowBytes(n), 7, n, batch.data(), 1);
      for (int tok = 0; tok < 7; ++tok) {
        // The token's row quantized on its own, and dotted alone.
        const std::vector<float> xt(x.begin() + tok * n, x.begin() + (tok + 1) * n);
        const std::vector<uint8_t> at = Quantized(k, xt, 1, n);
        float alone = 0;
        Q8ARowDot(k, t)(w.data(), at.data(), Q8ARowBytes(n), 1, n, &alone, 1);
        ASSERT_TRUE(SameBits(alone, batch[tok]))
            << KernelSetName(s) << " " << GgmlTypeInfoOf(t).name << " token " << tok;
      }
    }
  }
}

// Q8AKernelsFor's set -> table rule: each set its own table (avxvnni: the AVX2 one where the
// compiler has no AVX-VNNI; avx512vnni: avxvnni's where the CPU runs AVX-VNNI, else avx2's),
// scalar where the build lacks the set.
TEST(QuantsQ8A, EachSetMapsToItsTable) {
  EXPECT_EQ(&Q8AKernelsFor(KernelSet::kScalar), &ScalarQ8AKernels());
  const Q8AKernels* vnni = AvxVnniQ8AKernels() != nullptr ? AvxVnniQ8AKernels() : Avx2Q8AKernels();
  for (KernelSet s : kAllKernelSets) {
    const Q8AKernels* own = &ScalarQ8AKernels();
    if (s == KernelSet::kAvx2) own = Avx2Q8AKernels();
    if (s == KernelSet::kAvxVnni) own = vnni;
    if (s == KernelSet::kAvx512Vnni) own = CpuRunsAvxVnni() ? vnni : Avx2Q8AKernels();
    if (s == KernelSet::kNeon) own = NeonQ8AKernels();
    EXPECT_EQ(&Q8AKernelsFor(s), own != nullptr ? own : &ScalarQ8AKernels()) << KernelSetName(s);
  }
}

}  // namespace
}  // namespace pinfer::quants
