// The AVX2 set of quants_packed_k.h: 8 rows (one group) x 6 tokens (Q6_K: 5) per register block,
// the 4-value dots by vpmaddubsw, their int16 pairs summed as int16 over short runs and folded
// in by vpmaddwd against the sub-block scales (no vpdpbusd in AVX2; kI16 in
// quants_packed_k_simd.h), the mins (Q6_K: the offset) by vpmaddwd against the activation block
// sums (quants_packed_k_simd.h). Bit for bit the row kernels of quants_q8k.h.
//
// As in quants_q8k_avx2.cc, only the code below the target pragma is compiled for AVX2; the
// accessor at the end is baseline code (the caller checks cpuid before calling the kernels).
#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "loaders/quants_packed_k.h"
#include "loaders/x86_target_push.h"
// The vector code from here to x86_target_pop.h: compiled for AVX2 + FMA + F16C.
#include "loaders/quants_packed_k_simd.h"

namespace pinfer::quants {
namespace {

// Register blocks measured on packed_kquant_bench's 4096 x 4096 x 512 tokens (one core, load
// about 4, CPU time): Q4_K 3 tokens split 177 Gop/s, 5 / 6 / 7 / 8 unsplit 236 / 241 / 232 / 213;
// Q6_K 4 / 5 / 6 tokens 173 / 183 / 177. With kPin and the unrolled prefill loops (Zen 3, 64
// tokens, callgrind instructions per pass): Q6_K 5 tokens 206 M, 6 tokens 194 M.
struct Avx2V : Ymm {
  static constexpr int kTok = 6, kTok6 = 6, kSplitTok = 3, kQuadTok6 = 1;
  static constexpr bool kI16 = true;  // sub-block sums as int16 (quants_packed_k_simd.h's kRun)
  static constexpr bool kPin = true;  // partial sums pinned to registers (quants_packed_k_simd.h)
  // Prefill by decoded super-block (quants_packed_k_simd.h's GroupChunk) for Q5_K and Q6_K, not
  // Q4_K (kQ4, kQ5, kQ6). Measured below.
  static constexpr bool kDecodeOnce[3] = {false, true, true};
  static I Mad16(I acc, I w, const uint8_t* a) {
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(w, Bcast(a)));
  }
  static I Madd16(I a, I b) { return _mm256_madd_epi16(a, b); }
  static I Dot2(I acc, I w, const uint8_t* b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, Bcast(b)));
  }
};

constexpr PackedKQuantKernels kAvx2Set{"avx2", PackedDot<Avx2V, Avx2V, kQ4>,
                                       PackedDot<Avx2V, Avx2V, kQ5>, PackedDot<Avx2V, Avx2V, kQ6>};

}  // namespace
}  // namespace pinfer::quants

#include "loaders/x86_target_pop.h"

namespace pinfer::quants {
const PackedKQuantKernels* Avx2PackedKQuantKernels() { return &kAvx2Set; }
}  // namespace pinfer::quants

#else  // not x86-64

#include "loaders/quants_packed_k.h"

namespace pinfer::quants {
const PackedKQuantKernels* Avx2PackedKQuantKernels() { return nullptr; }
}  // namespace pinfer::quants

#endif
