// The arithmetic of CPU attention, one set of kernels per instruction set (internal to
// kvcache/; attention.cc drives them). A kernel works on one tile of up to kTile consecutive
// tokens of one kv head and the query heads of its group: it reads the tile's encoded K or V
// rows in place (no decoded copy of the cache), so each set decodes the KV formats itself.
// Every set computes the same quantities; they differ only in the order of float additions
// (and in the last bits of exp), so their results agree within rounding, not bit for bit.
// Within one set, a head's result depends only on its own query and rows, never on the block
// size, the layout or which other heads share the call.
#pragma once

#include <cstdint>

#include "kvcache/attention.h"
#include "kvcache/kv_dtype.h"
#include "loaders/kernel_set.h"

namespace pinfer::attention {

// Tokens per online-softmax step: the running maximum and sum are updated once per tile.
// Tiles start at the window's first position, whatever the block size, so paged and
// contiguous caches give bit-identical results.
constexpr int kTile = 64;

// One kv head's values in the encoded rows of a tile of tokens.
struct HeadRows {
  const uint8_t* const* rows = nullptr;  // [n] encoded rows, KvRowBytes(dtype, n_row) bytes each
  int n = 0;                             // tokens in the tile, 1..kTile
  KvDtype dtype = KvDtype::kF32;
  int64_t n_row = 0;  // values per row (kv heads x head_dim)
  int64_t begin = 0;  // the head's first value within a row
  int hd = 0;         // values of the head (head_dim)
};

struct AttentionKernels {
  const char* name;  // "scalar", "avx2", "neon"
  // scores[h * kTile + j] = scale * dot(q + h * hd, K_j) for heads h < n_q, tokens j < k.n.
  // buf: kTile * hd floats of scratch.
  void (*score)(const HeadRows& k, const float* q, int n_q, float scale, float* scores, float* buf);
  // s[j] = exp(s[j] - m) for j < n (m >= every s[j]); returns the sum of the new s[j].
  float (*exp_sum)(float* s, int n, float m);
  // acc[h * hd + i] += sum over tokens j < v.n, in token order, of p[h * kTile + j] * V_j[i]
  // for heads h < n_q. buf: kTile * hd floats of scratch.
  void (*accumulate)(const HeadRows& v, const float* p, int n_q, float* acc, float* buf);
};

// Plain C++, any CPU: decodes each row with KvDecodeRange and sums in index order.
const AttentionKernels& ScalarAttentionKernels();
// AVX2 + FMA + F16C; nullptr in a build for another architecture.
const AttentionKernels* Avx2AttentionKernels();
// NEON (AArch64); nullptr in a build for another architecture.
const AttentionKernels* NeonAttentionKernels();

// The sets this build has that this CPU can run, the best first (scalar always last).
int AvailableAttentionKernels(const AttentionKernels** sets, int max_sets);
// The attention kernels of kernel set s (scalar where this build has no such set).
const AttentionKernels& AttentionKernelsFor(KernelSet s);
// The set attention uses: the process's kernel set (ActiveKernelSet(), loaders/kernel_set.h).
const AttentionKernels& ActiveAttentionKernels();

// AttendOne computed by the kernel set k (tests compare the sets through it).
void AttendOneWith(const AttentionKernels& k, const KvCache& cache, SeqId seq, int layer,
                   const AttentionShape& s, const float* q, int n_ctx, int kv_begin, int kv_end,
                   float* out, float* scratch);

}  // namespace pinfer::attention
