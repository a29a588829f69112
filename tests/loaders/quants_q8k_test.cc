// The K-quant integer kernels of loaders/quants_q8k.h: the Q8_K quantizer against llama.cpp's
// reference semantics, every kernel set against the scalar reference bit for bit (activations
// and dot products), every kernel against the float64 dot of the dequantized weights, and batch
// invariance (a token's result is the same alone, in a batch of 7 or 16, or past a 512-token
// pass).
#include "loaders/quants_q8k.h"

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
#include "loaders/quants.h"
#include "loaders/quants_tile.h"

namespace pinfer::quants {
namespace {

constexpr int64_t kSizes[] = {256, 4096, 11008};

// The sets this build has and this CPU runs, the scalar reference first.
std::vector<const KQuantKernels*> Sets() {
  std::vector<const KQuantKernels*> sets{&ScalarKQuantKernels()};
#if defined(__x86_64__)
  if (Avx2KQuantKernels() != nullptr && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    sets.push_back(Avx2KQuantKernels());
  }
#endif
  if (NeonKQuantKernels() != nullptr) sets.push_back(NeonKQuantKernels());
  return sets;
}

// Values of realistic but uneven size: gaussian, times a per-32-value scale spread over two
// decades, with a few outliers (as weights and hidden states have). Never all zero.
std::vector<float> Realistic(int64_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> decades(-1.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> x(static_cast<size_t>(n));
  float group = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 32 == 0) group = sigma * std::pow(10.0f, decades(rng));
    x[i] = gauss(rng) * group * (pick(rng) == 0 ? 8.0f : 1.0f);
  }
  return x;
}

struct Format {
  const char* name;
  GgmlType type;
  RowDotFn KQuantKernels::*dot;
};
const Format kFormats[] = {{"Q4_K", GgmlType::kQ4_K, &KQuantKernels::q4_k},
                           {"Q5_K", GgmlType::kQ5_K, &KQuantKernels::q5_k},
                           {"Q6_K", GgmlType::kQ6_K, &KQuantKernels::q6_k}};

// rows weight rows of n values, quantized by the project's reference quantizer.
std::vector<uint8_t> QuantizedRows(GgmlType t, int rows, int64_t n, uint32_t seed) {
  const size_t row_bytes = GgmlRowBytes(t, n);
  std::vector<uint8_t> w(row_bytes * rows);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = Realistic(n, 0.02f, seed + r);
    QuantizeRow(t, x.data(), w.data() + r * row_bytes, n);
  }
  return w;
}

// Random bytes with finite fp16 scales: every code, scale, min and high-bit pattern.
std::vector<uint8_t> RandomRow(GgmlType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::vector<uint8_t> w(GgmlRowBytes(t, n));
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  const size_t block = GgmlRowBytes(t, kQK_K);
  std::vector<size_t> fp16;
  if (t == GgmlType::kQ4_K) fp16 = {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
  if (t == GgmlType::kQ5_K) fp16 = {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
  if (t == GgmlType::kQ6_K) fp16 = {offsetof(BlockQ6_K, d)};
  for (size_t b = 0; b < w.size(); b += block) {
    for (size_t off : fp16) {
      const uint16_t h = Fp32ToFp16(scale(rng));
      std::memcpy(w.data() + b + off, &h, 2);
    }
  }
  return w;
}

// n_tok token rows of n activations, quantized by kernels' quantizer.
std::vector<uint8_t> Activations(const KQuantKernels& k, const std::vector<float>& x, int n_tok,
                                 int64_t n) {
  std::vector<uint8_t> a(static_cast<size_t>(Q8KRowBytes(n) * n_tok));
  for (int t = 0; t < n_tok; ++t)
    k.quantize_q8k(x.data() + t * n, a.data() + t * Q8KRowBytes(n), n);
  return a;
}

BlockQ8_K BlockAt(const std::vector<uint8_t>& acts, int64_t index) {
  BlockQ8_K b;
  std::memcpy(&b, acts.data() + index * sizeof(BlockQ8_K), sizeof(b));
  return b;
}

TEST(Q8KQuantizer, FollowsTheReferenceSemantics) {
  for (const KQuantKernels* k : Sets()) {
    for (int64_t n : kSizes) {
      std::vector<float> x = Realistic(n, 1.0f, 5);
      // Block 1 zero; block 2 too small for a finite 127 / max; block 3 just large enough.
      std::fill(x.begin() + kQK_K, x.begin() + std::min<int64_t>(n, 2 * kQK_K), 0.0f);
      if (n > 4 * kQK_K) {
        for (int j = 0; j < kQK_K; ++j) x[2 * kQK_K + j] = 1e-38f * (j % 3 - 1.0f);
        for (int j = 0; j < kQK_K; ++j) x[3 * kQK_K + j] = 1e-36f * (j % 5 - 2.0f);
      }
      const std::vector<uint8_t> acts = Activations(*k, x, 1, n);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const BlockQ8_K b = BlockAt(acts, i);
        const float* xb = x.data() + i * kQK_K;
        float amax = 0, max = 0;
        for (int j = 0; j < kQK_K; ++j) {
          if (std::fabs(xb[j]) > amax) {
            amax = std::fabs(xb[j]);
            max = xb[j];
          }
        }
        if (amax == 0 || std::isinf(-127.0f / max)) {
          EXPECT_EQ(b.d, 0.0f);
          for (int j = 0; j < kQK_K; ++j) ASSERT_EQ(b.qs[j], 0);
          for (int s = 0; s < 16; ++s) ASSERT_EQ(b.bsums[s], 0);
          continue;
        }
        const float iscale = -127.0f / max;
        EXPECT_EQ(b.d, 1.0f / iscale) << k->name;
        for (int j = 0; j < kQK_K; ++j) {
          const int want = std::min(127, static_cast<int>(std::nearbyint(iscale * xb[j])));
          ASSERT_EQ(b.qs[j], want) << k->name << " block " << i << " value " << j;
          // Round trip: within half a step of the value (and the step is amax / 127).
          ASSERT_LE(std::fabs(b.d * b.qs[j] - xb[j]), 0.5f * std::fabs(b.d) * 1.0001f);
          if (xb[j] == max) {
            EXPECT_EQ(b.qs[j], -127);
          }
        }
        for (int s = 0; s < 16; ++s) {
          int sum = 0;
          for (int l = 0; l < 16; ++l) sum += b.qs[16 * s + l];
          ASSERT_EQ(b.bsums[s], sum) << k->name << " block " << i << " sum " << s;
        }
      }
    }
  }
}

TEST(Q8KQuantizer, SetsWriteTheSameBytes) {
  const std::vector<const KQuantKernels*> sets = Sets();
  for (int64_t n : kSizes) {
    std::vector<float> x = Realistic(n, 0.3f, 9);
    x[3] = 50.0f;  // two values of largest magnitude, opposite signs: the first wins
    x[7] = -50.0f;
    if (n > kQK_K) {  // the last block near the overflow of 127 / max
      for (int j = 0; j < kQK_K; ++j) x[n - kQK_K + j] = 3e-37f * (j % 7 - 3.0f);
    }
    const std::vector<uint8_t> want = Activations(*sets[0], x, 1, n);
    for (const KQuantKernels* k : sets) {
      EXPECT_EQ(Activations(*k, x, 1, n), want) << k->name << " n " << n;
    }
  }
}

// Every set's dot products equal the scalar reference's bit for bit, on quantized weights and
// on random bytes, for 1..16 tokens and a strided output.
TEST(KQuantDot, SetsMatchTheScalarReferenceExactly) {
  const std::vector<const KQuantKernels*> sets = Sets();
  const KQuantKernels& ref = *sets[0];
  constexpr int kTok = 16;
  for (const Format& f : kFormats) {
    for (int64_t n : kSizes) {
      const std::vector<float> x = Realistic(n * kTok, 1.0f, 21);
      const std::vector<uint8_t> acts = Activations(ref, x, kTok, n);
      for (int variant = 0; variant < 2; ++variant) {
        const std::vector<uint8_t> w =
            variant == 0 ? QuantizedRows(f.type, 1, n, 3) : RandomRow(f.type, n, 4);
        std::vector<float> want(kTok);
        (ref.*f.dot)(w.data(), acts.data(), Q8KRowBytes(n), kTok, n, want.data(), 1);
        for (const KQuantKernels* k : sets) {
          std::vector<float> got(2 * kTok, -1.0f);
          (k->*f.dot)(w.data(), acts.data(), Q8KRowBytes(n), kTok, n, got.data(), 2);
          for (int t = 0; t < kTok; ++t) {
            ASSERT_EQ(got[2 * t], want[t]) << k->name << " " << f.name << " n " << n
                                           << (variant ? " random bytes" : "") << " token " << t;
            ASSERT_EQ(got[2 * t + 1], -1.0f) << "wrote between strided outputs";
          }
        }
      }
    }
  }
}

// Against float64: (a) the dequantized weights times the dequantized activations, where only
// float rounding separates them (the integer sums are exact), and (b) the dequantized weights
// times the original float activations, within the activation quantization's own bound
// sum_blocks |d_a| / 2 * sum |w| (each code within half a step). Measured on these data
// (scalar and AVX2 alike; the figures are recorded as test properties), the error relative to
// sum |w_i x_i| is at most 4e-8 for (a), tested against 1e-6, and 2.8e-3 for (b) (Q8_K's 8 bits
// against one value of largest magnitude per 256), tested against 1e-2 and the bound.
TEST(KQuantDot, MatchesTheFloat64DotOfTheDequantizedRow) {
  constexpr int kTok = 3;
  for (const KQuantKernels* k : Sets()) {
    for (const Format& f : kFormats) {
      for (int64_t n : kSizes) {
        const std::vector<uint8_t> w = QuantizedRows(f.type, 1, n, 33);
        std::vector<float> wf(n);
        DequantizeRow(f.type, w.data(), wf.data(), n);
        const std::vector<float> x = Realistic(n * kTok, 1.0f, 44);
        const std::vector<uint8_t> acts = Activations(*k, x, kTok, n);
        std::vector<float> y(kTok);
        (k->*f.dot)(w.data(), acts.data(), Q8KRowBytes(n), kTok, n, y.data(), 1);
        double worst_exact = 0, worst_float = 0;
        for (int t = 0; t < kTok; ++t) {
          double exact = 0, exact_l1 = 0, orig = 0, orig_l1 = 0, bound = 0;
          for (int64_t b = 0; b < n / kQK_K; ++b) {
            const BlockQ8_K ab = BlockAt(acts, t * (n / kQK_K) + b);
            double w_l1 = 0;
            for (int j = 0; j < kQK_K; ++j) {
              const int64_t i = b * kQK_K + j;
              const double a = double(ab.d) * ab.qs[j];
              exact += double(wf[i]) * a;
              exact_l1 += std::fabs(double(wf[i]) * a);
              orig += double(wf[i]) * x[t * n + i];
              orig_l1 += std::fabs(double(wf[i]) * x[t * n + i]);
              w_l1 += std::fabs(double(wf[i]));
            }
            bound += std::fabs(double(ab.d)) / 2 * w_l1;
          }
          ASSERT_GT(exact_l1, 0.0);
          const double err_exact = std::fabs(y[t] - exact), err_float = std::fabs(y[t] - orig);
          // (a) A few roundings per block, each within 2^-24 of the running sum.
          EXPECT_LE(err_exact, 1e-6 * exact_l1) << k->name << " " << f.name << " n " << n;
          // (b) The quantization bound, plus (a)'s rounding.
          EXPECT_LE(err_float, bound * 1.0001 + 1e-6 * exact_l1)
              << k->name << " " << f.name << " n " << n;
          EXPECT_LE(err_float, 1e-2 * orig_l1) << k->name << " " << f.name << " n " << n;
          worst_exact = std::max(worst_exact, err_exact / exact_l1);
          worst_float = std::max(worst_float, err_float / orig_l1);
        }
        char figures[64];
        std::snprintf(figures, sizeof(figures), "%.2e %.2e", worst_exact, worst_float);
        RecordProperty(std::string(k->name) + "_" + f.name + "_" + std::to_string(n), figures);
      }
    }
  }
}

// A token's result does not depend on the batch: alone, as token t of 7 or of 16, or in the
// second pass of a 520-token batch, bit for bit.
TEST(KQuantDot, BatchInvariant) {
  for (const KQuantKernels* k : Sets()) {
    for (const Format& f : kFormats) {
      for (int64_t n : {int64_t{256}, int64_t{4096}}) {
        const int max_tok = n == 256 ? 520 : 16;
        const std::vector<uint8_t> w = QuantizedRows(f.type, 1, n, 55);
        const std::vector<float> x = Realistic(n * max_tok, 1.0f, 66);
        const std::vector<uint8_t> acts = Activations(*k, x, max_tok, n);
        const int64_t row = Q8KRowBytes(n);
        std::vector<float> batch(max_tok);
        for (int n_tok : {7, 16, max_tok}) {
          (k->*f.dot)(w.data(), acts.data(), row, n_tok, n, batch.data(), 1);
          for (int t = 0; t < n_tok; t += (n_tok > 16 ? 37 : 1)) {
            float alone = 0;
            (k->*f.dot)(w.data(), acts.data() + t * row, row, 1, n, &alone, 1);
            ASSERT_EQ(batch[t], alone)
                << k->name << " " << f.name << " n " << n << " token " << t << " of " << n_tok;
          }
        }
        float last = 0;  // past the first 512-token pass
        (k->*f.dot)(w.data(), acts.data() + (max_tok - 1) * row, row, 1, n, &last, 1);
        EXPECT_EQ(batch[max_tok - 1], last);
      }
    }
  }
}

// The set -> table rule beside the tables (MatMul's choice): every set this CPU runs gets the
// table of its own family, and the tiles exist exactly for the AVX2-family sets.
TEST(KQuantKernels, EachSetMapsToItsFamilysTable) {
  EXPECT_EQ(&KQuantKernelsFor(KernelSet::kScalar), &ScalarKQuantKernels());
  EXPECT_EQ(KQuantTileKernelsFor(KernelSet::kScalar), nullptr);
  EXPECT_EQ(KQuantTileKernelsFor(KernelSet::kNeon), nullptr);
  for (KernelSet s : kAllKernelSets) {
    const char* want = UsesAvx2Kernels(s) && Avx2KQuantKernels() != nullptr ? "avx2"
                       : s == KernelSet::kNeon && NeonKQuantKernels() != nullptr
                           ? NeonKQuantKernels()->name
                           : "scalar";
    EXPECT_STREQ(KQuantKernelsFor(s).name, want) << KernelSetName(s);
    EXPECT_EQ(KQuantTileKernelsFor(s) != nullptr,
              UsesAvx2Kernels(s) && Avx2KQuantTileKernels() != nullptr)
        << KernelSetName(s);
  }
}

TEST(KQuantKernels, NamesAndAvailability) {
  EXPECT_STREQ(ScalarKQuantKernels().name, "scalar");
#if defined(__x86_64__)
  ASSERT_NE(Avx2KQuantKernels(), nullptr);
  EXPECT_STREQ(Avx2KQuantKernels()->name, "avx2");
  EXPECT_EQ(NeonKQuantKernels(), nullptr);
#elif defined(__aarch64__)
  EXPECT_EQ(Avx2KQuantKernels(), nullptr);
  ASSERT_NE(NeonKQuantKernels(), nullptr);
#endif
}

}  // namespace
}  // namespace pinfer::quants
