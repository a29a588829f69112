// The tiled integer GEMM kernels of the 32-value formats (loaders/quants_tile.h's Q8A tiles):
// every tile set, for every shape of 1..9 rows x 1..17 tokens (every edge of the AVX2 set's
// 2 x 4 tiles) and past its L2 chunk of tokens, gives bit for bit the row kernels' values
// (quants_q8a.h) for each (row, token) pair, and writes nothing outside its outputs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"
#include "loaders/quants_tile.h"

namespace pinfer::quants {
namespace {

bool CpuHasAvx2() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

struct Set {
  const Q8ATileKernels* tiles;
  const Q8AKernels* rows;
};
std::vector<Set> Sets() {
  std::vector<Set> sets{{&ScalarQ8ATileKernels(), &ScalarQ8AKernels()}};
  if (Avx2Q8ATileKernels() != nullptr && Avx2Q8AKernels() != nullptr && CpuHasAvx2())
    sets.push_back({Avx2Q8ATileKernels(), Avx2Q8AKernels()});
  if (AvxVnniQ8ATileKernels() != nullptr && AvxVnniQ8AKernels() != nullptr &&
      KernelSetRuns(KernelSet::kAvxVnni))
    sets.push_back({AvxVnniQ8ATileKernels(), AvxVnniQ8AKernels()});
  return sets;
}

struct Format {
  const char* name;
  GgmlType type;
  TileDotFn Q8ATileKernels::*tile;
  RowDotFn Q8AKernels::*row;
};
const Format kFormats[] = {{"Q4_0", GgmlType::kQ4_0, &Q8ATileKernels::q4_0, &Q8AKernels::q4_0},
                           {"Q4_1", GgmlType::kQ4_1, &Q8ATileKernels::q4_1, &Q8AKernels::q4_1},
                           {"Q5_0", GgmlType::kQ5_0, &Q8ATileKernels::q5_0, &Q8AKernels::q5_0},
                           {"Q5_1", GgmlType::kQ5_1, &Q8ATileKernels::q5_1, &Q8AKernels::q5_1},
                           {"Q8_0", GgmlType::kQ8_0, &Q8ATileKernels::q8_0, &Q8AKernels::q8_0}};

// Gaussian values times a per-32-value scale over two decades, a few outliers; never all zero.
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

struct Problem {
  int64_t n, w_row_bytes, act_row_bytes;
  int rows, tokens;
  std::vector<uint8_t> w, acts;
  std::vector<float> ref;  // ref[t * rows + r]: the scalar row kernel's value
};

Problem Make(const Format& f, int64_t n, int rows, int tokens) {
  Problem p{n, static_cast<int64_t>(GgmlRowBytes(f.type, n)), Q8ARowBytes(n), rows, tokens, {}, {},
            {}};
  p.w.resize(p.w_row_bytes * rows);
  for (int r = 0; r < rows; ++r) {
    const std::vector<float> x = Realistic(n, 0.02f, 100 + r);
    QuantizeRow(f.type, x.data(), p.w.data() + r * p.w_row_bytes, n);
  }
  const std::vector<float> x = Realistic(n * tokens, 1.0f, 7);
  p.acts.resize(p.act_row_bytes * tokens);
  for (int t = 0; t < tokens; ++t)
    ScalarQ8AKernels().quantize(x.data() + t * n, p.acts.data() + t * p.act_row_bytes, n);
  p.ref.resize(static_cast<size_t>(rows) * tokens);
  const RowDotFn dot = ScalarQ8AKernels().*f.row;
  for (int r = 0; r < rows; ++r) {
    dot(p.w.data() + r * p.w_row_bytes, p.acts.data(), p.act_row_bytes, tokens, n, p.ref.data() + r,
        rows);
  }
  int nonzero = 0;
  for (float v : p.ref) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, rows * tokens / 2) << "the reference must not be (nearly) all zero";
  return p;
}

uint32_t Bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

// The tile call for the first nr rows x nt tokens against p.ref; two spare columns per output
// row (y_row_stride = nr + 2) must keep their canary.
void Check(const Problem& p, TileDotFn tile, int nr, int nt, const std::string& what) {
  const int64_t stride = nr + 2;
  constexpr uint32_t kCanary = 0x7fc01234;  // a NaN no kernel writes
  float canary;
  std::memcpy(&canary, &kCanary, sizeof(canary));
  std::vector<float> y(static_cast<size_t>(stride * nt), canary);
  tile(p.w.data(), p.w_row_bytes, nr, p.acts.data(), p.act_row_bytes, nt, p.n, y.data(), stride);
  int bad = 0;
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < stride; ++r) {
      const uint32_t want = r < nr ? Bits(p.ref[t * p.rows + r]) : kCanary;
      if (Bits(y[t * stride + r]) != want && ++bad <= 3) {
        ADD_FAILURE() << what << " rows " << nr << " tokens " << nt << ": y[" << t << "][" << r
                      << "] = " << y[t * stride + r] << ", want "
                      << (r < nr ? p.ref[t * p.rows + r] : canary);
      }
    }
  }
}

TEST(QuantTileQ8A, EveryEdgeShapeIsTheRowKernelBitForBit) {
  for (const Format& f : kFormats) {
    for (int64_t n : {256, 4096}) {
      const Problem p = Make(f, n, 9, 17);
      for (const Set& s : Sets()) {
        for (int nr = 1; nr <= 9; ++nr) {
          for (int nt = 1; nt <= 17; ++nt) {
            Check(p, s.tiles->*f.tile, nr, nt,
                  std::string(s.tiles->name) + " " + f.name + " n " + std::to_string(n));
          }
        }
      }
    }
  }
}

TEST(QuantTileQ8A, PastTheTokenChunk) {  // 4096 values: 5120-byte rows, a 256 KiB chunk of 48
  for (const Format& f : kFormats) {
    const Problem p = Make(f, 4096, 5, 101);
    for (const Set& s : Sets())
      Check(p, s.tiles->*f.tile, 5, 101, std::string(s.tiles->name) + " " + f.name);
  }
}

TEST(QuantTileQ8A, AgreesWithTheSetsRowKernel) {
  for (const Format& f : kFormats) {
    const Problem p = Make(f, 4096, 3, 12);
    for (const Set& s : Sets()) {
      std::vector<float> row(3 * 12), tile(3 * 12);
      for (int r = 0; r < 3; ++r) {
        (s.rows->*f.row)(p.w.data() + r * p.w_row_bytes, p.acts.data(), p.act_row_bytes, 12, 4096,
                         row.data() + r, 3);
      }
      (s.tiles->*f.tile)(p.w.data(), p.w_row_bytes, 3, p.acts.data(), p.act_row_bytes, 12, 4096,
                         tile.data(), 3);
      for (int i = 0; i < 3 * 12; ++i)
        EXPECT_EQ(Bits(row[i]), Bits(tile[i])) << s.tiles->name << " " << f.name << " " << i;
    }
  }
}

}  // namespace
}  // namespace pinfer::quants
