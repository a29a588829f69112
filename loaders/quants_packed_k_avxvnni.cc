// The AVX-VNNI set of quants_packed_k.h: 8 rows (one group) x 6 tokens per register
// block, the 4-value dots by 256-bit vpdpbusd (VEX), the sub-block scales by vpmulld, the mins
// (Q6_K: the offset) by vpdpwssd against the activation block sums (quants_packed_k_simd.h). Bit
// for bit the row kernels of quants_q8k.h.
//
// As in quants_q8k_avx2.cc, only the code below the target pragma is compiled for AVX-VNNI; the
// accessor at the end is baseline code (the caller checks cpuid before calling the kernels).
// AvxVnniPackedKQuantKernels() is null where the compiler has no AVX-VNNI (GCC < 11, clang < 12).
#if (defined(__x86_64__) || defined(_M_X64)) &&       \
    ((defined(__clang__) && __clang_major__ >= 12) || \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "loaders/quants_packed_k.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif

#include "loaders/quants_packed_k_simd.h"

namespace pinfer::quants {
namespace {

// Register blocks measured on packed_kquant_bench's 4096 x 4096 x 512 tokens (one core, load
// about 4, CPU time): Q4_K 3 tokens split 265 Gop/s, 4 / 5 / 6 unsplit 268 / 277-278 / 283;
// Q6_K 5 / 6 / 7 tokens 217 / 241-244 / 234.
struct VnniV : Ymm {
  static constexpr int kTok = 6, kTok6 = 6, kSplitTok = 3, kQuadTok6 = 1;
  static I Dot4(I acc, I w, const uint8_t* a) { return _mm256_dpbusd_avx_epi32(acc, w, Bcast(a)); }
  static I Dot2(I acc, I w, const uint8_t* b) { return _mm256_dpwssd_avx_epi32(acc, w, Bcast(b)); }
};

constexpr PackedKQuantKernels kVnniSet{"avxvnni", PackedDot<VnniV, VnniV, kQ4>,
                                       PackedDot<VnniV, VnniV, kQ5>, PackedDot<VnniV, VnniV, kQ6>};

}  // namespace
}  // namespace pinfer::quants

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

namespace pinfer::quants {
const PackedKQuantKernels* AvxVnniPackedKQuantKernels() { return &kVnniSet; }
}  // namespace pinfer::quants

#else  // not x86-64, or no AVX-VNNI in the compiler

#include "loaders/quants_packed_k.h"

namespace pinfer::quants {
const PackedKQuantKernels* AvxVnniPackedKQuantKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
