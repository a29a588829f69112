// CPU attention over the KV cache: keys and values are read through the sequence's block
// table (paged) or its single block (contiguous) in the KV format, without a decoded copy.
#pragma once

#include "kvcache/kv_cache.h"

namespace pinfer {

struct AttentionShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query: n_heads % n_kv_heads == 0)
  int head_dim = 0;
  float scale = 0;  // usually 1 / sqrt(head_dim)
  // Sliding window in positions: > 0 attends only to the last `window` positions of the
  // context (keys max(0, n_ctx - window) .. n_ctx - 1, the query's own included: llama.cpp's
  // LLAMA_SWA_TYPE_STANDARD mask, which drops key p0 for query p1 when p1 - p0 >= window);
  // rows before them are never read, so their blocks may be gone. 0: the whole context.
  int window = 0;
  // Attention logit soft-capping (gemma2): > 0 turns each score q.k into
  // softcap * tanh(q.k / softcap) before it is multiplied by `scale`, as llama.cpp orders them.
  float softcap = 0;
};

// Floats of scratch AttendOne needs (whatever the context's length).
size_t AttentionScratchFloats(const AttentionShape& s);

// One query token of sequence `seq` in `layer` attends to cache positions [0, n_ctx) (the last
// s.window of them when s.window > 0).
// q:   [n_heads x head_dim] (RoPE applied), out: [n_heads x head_dim].
// Only the query heads of kv heads [kv_begin, kv_end) are computed (for splitting across
// threads); a head's result does not depend on the split. Softmax in float32, online over
// tiles of positions cut from the window's first one (attention_kernels.h), so the result
// does not depend on the layout or the block size. The CPU's best kernel set computes it;
// the others agree within float rounding. A context the sequence does not hold gives zeros.
void AttendOne(const KvCache& cache, SeqId seq, int layer, const AttentionShape& s, const float* q,
               int n_ctx, int kv_begin, int kv_end, float* out, float* scratch);

// How many consecutive kv heads one work item of a step's attention (AttendOne over one
// token's kv heads [kv, kv + heads)) should take, for n_tokens query tokens on n_threads
// threads: as many as leave every thread an item (one token) or about four (several tokens,
// whose contexts differ in length), and a divisor of n_kv_heads. An item reads its heads'
// slices of every row, adjacent bytes (the whole row when it takes every head), which the
// memory system streams far better than one head's slice every row_bytes; the results do not
// depend on the split. E.g. 32 kv heads, 1 token, 2 threads: 16.
int KvHeadsPerItem(int n_kv_heads, int n_tokens, int n_threads);

}  // namespace pinfer
