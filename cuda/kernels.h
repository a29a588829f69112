// Launchers of the CUDA kernels. Plain C++ (no absl, no CUDA vector types), so the .cu files
// stay light for nvcc; each returns the launch's cudaError_t (cudaGetLastError after the
// launch), which the host code turns into a Status with file and line (cuda_check.h).
//
// Type ids are GGUF's on-disk numbers (loaders/ggml_types.h) and KvDtype's enum order
// (kvcache/kv_dtype.h); cuda_backend.cc checks them with static_asserts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace pinfer::cuda {

// GGUF storage types the kernels multiply.
enum WType : int {
  kWF32 = 0,
  kWF16 = 1,
  kWQ4_0 = 2,
  kWQ4_1 = 3,
  kWQ5_0 = 6,
  kWQ5_1 = 7,
  kWQ8_0 = 8,
  kWQ4_K = 12,
  kWQ5_K = 13,
  kWQ6_K = 14,
  kWBF16 = 30
};
// KV formats, in KvDtype's order.
enum KType : int { kKF32 = 0, kKF16 = 1, kKBF16 = 2, kKQ8_0 = 3, kKQ4_0 = 4, kKFp8 = 5 };

// Token counts up to this use the dequantize-and-multiply GEMV; larger steps use cuBLAS.
constexpr int kMaxGemvTokens = 16;

// A [rows x cols] weight matrix in device memory, row-major in its storage type.
struct DeviceMatrix {
  int type = kWF32;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  const uint8_t* data = nullptr;
  // Act-order input permutation (WeightMatrix::input_perm), [cols] in device memory: the
  // matrix multiplies x'[k] = x[perm[k]]; nullptr: identity. LaunchGemv* ignore it
  // (DeviceMatMul gathers x first).
  const int32_t* perm = nullptr;
};

bool WeightTypeSupported(int type);

// The decode GEMV's lane layout for block types. kGroups (the default, gemv_groups.cuh): lane
// l of a row's warp takes 8-value groups l, l + 32, ..., so the warp reads x contiguously.
// kUnits (gemv_units.cuh): each lane takes whole blocks with the widest loads the layout
// allows, and the warp reads x at a stride of a block. Which is faster is the GPU's to say:
// cuda_bench times both. PINFER_CUDA_GEMV=units|groups in the environment sets the initial
// choice; CUDA graphs keep the kernels they were captured with.
enum class GemvLayout { kGroups = 0, kUnits = 1 };
void SetGemvLayout(GemvLayout layout);
GemvLayout CurrentGemvLayout();

// Programmatic dependent launch of the decode GEMVs (pdl.cuh; Hopper and later), off by
// default until a GPU has measured it: a GEMV's blocks start while the kernel before it
// finishes, pull their weight rows into L2 and wait for its results before reading x. Every
// other kernel allows its successor to start early. PINFER_CUDA_PDL=1 in the environment sets
// the initial choice; CUDA graphs keep the launches they were captured with.
void SetProgrammaticLaunch(bool on);
bool ProgrammaticLaunch();
// Values per quantization group of 8 needing no tail: cols % 8 == 0 for block types.

// x[t] = dequant(emb.row(tokens[t])), t < n.
cudaError_t LaunchEmbedding(const DeviceMatrix& emb, const int32_t* tokens, int n, float* x,
                            cudaStream_t s);
// y[t][r] = sum_c W[r][c] x[t][c] for t < n <= kMaxGemvTokens (accumulate: y[t][r] += ...);
// x: [n x cols], 16-byte aligned; y: [n x ldy].
cudaError_t LaunchGemv(const DeviceMatrix& w, const float* x, int n, float* y, int64_t ldy,
                       cudaStream_t s, bool accumulate = false);
// One launch for up to 3 matrices over the same x: ys[i][t][r] = W_i x[t] ([n x ws[i]->rows]).
// cudaErrorNotSupported, launching nothing, unless they share a block type, a column count
// and a layout the vectorised kernels read; then launch them one by one.
cudaError_t LaunchGemvMulti(const DeviceMatrix* const* ws, float* const* ys, int count,
                            const float* x, int n, cudaStream_t s);
// y[t][r] = silu(gate[r] . x[t]) x (up[r] . x[t]), y: [n x gate.rows]; cudaErrorNotSupported
// as LaunchGemvMulti (then: two GEMVs and LaunchSwiGlu).
cudaError_t LaunchGemvSwiGlu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x,
                             int n, float* y, cudaStream_t s);
// out[t][k] = x[t][perm[k]], t < n, k < cols.
cudaError_t LaunchGatherColumns(const float* x, const int32_t* perm, int n, int64_t cols,
                                float* out, cudaStream_t s);
// Rows [row0, row0 + n_rows) of w as half (bf16 = false) or bfloat16 -> out[n_rows x cols].
cudaError_t LaunchDequantRows(const DeviceMatrix& w, int64_t row0, int64_t n_rows, void* out,
                              bool bf16, cudaStream_t s);
// out[i] = half (saturated at +-65504: no infinities from outliers) or bfloat16 of x[i].
cudaError_t LaunchToHalf(const float* x, int64_t n, void* out, bool bf16, cudaStream_t s);

// out[i] = x[rows[i] or i] * rsqrt(mean(x^2) + eps) * w, i < n_rows (rows may be nullptr).
cudaError_t LaunchRmsNorm(const float* x, const int32_t* rows, const float* w, int n_rows, int dim,
                          float eps, float* out, cudaStream_t s);
// gate[i] = silu(gate[i]) * up[i].
cudaError_t LaunchSwiGlu(float* gate, const float* up, int64_t n, cudaStream_t s);
// x[t][i] += b[i], i < width.
cudaError_t LaunchAddBias(float* x, const float* b, int n_rows, int width, cudaStream_t s);

// Where one layer's K/V rows live in a KV pool laid out as kvcache/kv_cache.h says:
// block b at base + b x block_bytes, then [layer][k | v][slot][row_bytes].
struct KvLayerView {
  int dtype = kKF16;
  uint8_t* base = nullptr;  // the pool
  size_t block_bytes = 0, row_bytes = 0;
  int block_size = 0;
  size_t layer_offset = 0;  // layer x 2 x block_size x row_bytes
  size_t v_offset = 0;      // block_size x row_bytes (from a K row to its V row)
  int kv_dim = 0;           // values per row: n_kv_heads x head_dim
};

// Encodes k[t] rotated by RoPE at positions[t], and v[t] (kv_dim floats each), into the rows
// at base + slot_offset[t] + layer_offset (+ v_offset), where slot_offset[t] = block x
// block_bytes + slot x row_bytes; tokens with slot_offset[t] < 0 (padding) write nothing.
// k itself is left unrotated (nothing reads it afterwards); q ([n_tokens x n_heads x
// head_dim]) is rotated in place. RoPE as ApplyRope (engine/cpu/ops.h): freqs =
// RopeFrequencies(theta, head_dim) on the device ([head_dim / 2]), then freq_factors
// ([head_dim / 2] on the device, or nullptr) and freq_scale; halves: the NeoX pair order.
cudaError_t LaunchRopeKvWrite(const KvLayerView& kv, float* q, int n_heads, const float* k,
                              const float* v, int n_tokens, const int64_t* slot_offset,
                              int head_dim, const int32_t* positions, const float* freqs,
                              bool halves, cudaStream_t s, float freq_scale = 1.0f,
                              const float* freq_factors = nullptr);

// Causal paged attention, one query per token: token t attends to positions [0, pos[t]] of
// its sequence, whose block table starts at tables + table_start[t].
// q, out: [n_tokens x n_heads x head_dim].
// split_scratch == nullptr: a thread block per (token, head) walks the whole context. Else
// (decode steps: few tokens, few blocks) each token's context is cut into at most max_splits
// splits of AttentionSplitLen(context, max_splits) positions, a block each ("flash
// decoding"); the last split of a (token, head) to finish merges them, in the same launch.
// The scratch holds AttentionSplitFloats(n_tokens, n_heads, head_dim, max_splits) floats (per
// (token, head) a counter and the splits' partial results; a launch of fewer tokens uses a
// prefix) and must be all zero bytes before its first use; every launch leaves the counters
// at zero again. The grid and the
// scratch depend on max_splits, not on the context length. A token's result depends only on
// its own context and max_splits (never on the other tokens of the step).
constexpr int kAttnMinSplitLen = 32;  // positions: one round of the block's warps
constexpr int kAttnMaxSplits = 64;
// Splits that give a decode step of one sequence about two thread blocks per SM.
int AttentionMaxSplits(int n_heads, int sm_count);
// Positions per split for a context of n_ctx positions: a multiple of kAttnMinSplitLen.
__host__ __device__ inline int AttentionSplitLen(int n_ctx, int max_splits) {
  const int even = (n_ctx + max_splits - 1) / max_splits;
  const int len = (even + kAttnMinSplitLen - 1) / kAttnMinSplitLen * kAttnMinSplitLen;
  return len > kAttnMinSplitLen ? len : kAttnMinSplitLen;
}
size_t AttentionSplitFloats(int n_tokens, int n_heads, int head_dim, int max_splits);
cudaError_t LaunchAttention(const KvLayerView& kv, const float* q, int n_tokens, int n_heads,
                            int n_kv_heads, int head_dim, float scale, const int32_t* tables,
                            const int32_t* table_start, const int32_t* positions, float* out,
                            cudaStream_t s, float* split_scratch = nullptr, int max_splits = 0);

}  // namespace pinfer::cuda
