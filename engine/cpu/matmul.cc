#include "engine/cpu/matmul.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/cpu/repack.h"
#include "loaders/ggml_types.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"
#include "loaders/quants_q8a.h"
#include "loaders/quants_q8k.h"
#include "loaders/quants_tile.h"

namespace pinfer {
namespace {
// F16 / BF16 / F32 batches smaller than this take the per-token DotRow: laying their rows out
// costs more than it saves (measured on Zen 5: F16 x 4 tokens 1.6 ms per token-by-token pass
// against 2.0 ms batched, break-even near 6 tokens).
constexpr int kPlainBatchFrom = 8;

absl::Status CheckWorkspace(const WeightMatrix& w, int n_tokens, const ThreadPool& pool,
                            const CpuWorkspace& ws) {
  const uint64_t cols = static_cast<uint64_t>(w.cols);
  const bool tile_per_thread = ws.Get(CpuBuffer::kMatMulTile, pool.size() - 1) != nullptr;
  if (cols * static_cast<uint64_t>(n_tokens) > ws.capacity(CpuBuffer::kMatMulInput) ||
      cols > ws.capacity(CpuBuffer::kMatMulGather) ||
      cols * kMatMulTileRows > ws.capacity(CpuBuffer::kMatMulTile) || !tile_per_thread) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MatMul of ", n_tokens, " tokens x ", w.cols, " inputs (", w.name, ") on ", pool.size(),
        " threads needs more than the workspace line's matmul scratch holds (",
        ws.bytes_per_copy(CpuBuffer::kMatMulInput),
        " bytes of inputs); the workspace was sized "
        "for fewer tokens, narrower matrices or fewer threads"));
  }
  return absl::OkStatus();
}

// Token t's inputs in the stored matrix's column order: out[k] = x_t[perm[k]].
void Gather(const WeightMatrix& w, const float* xt, float* out) {
  for (int64_t k = 0; k < w.cols; ++k) out[k] = xt[w.input_perm[static_cast<size_t>(k)]];
}

const quants::Q8AKernels& ActiveQ8A() {
  static const quants::Q8AKernels* const k = &quants::Q8AKernelsFor(ActiveKernelSet());
  return *k;
}

// The process's K-quant row kernels and tiles (null: batches take the row kernels); each table's
// *For function maps the kernel set to it.
const quants::KQuantKernels& ActiveKQuant() {
  static const quants::KQuantKernels* const k = &quants::KQuantKernelsFor(ActiveKernelSet());
  return *k;
}

const quants::KQuantTileKernels* ActiveKQuantTile() {
  static const quants::KQuantTileKernels* const k = quants::KQuantTileKernelsFor(ActiveKernelSet());
  return k;
}

// A weight format's integer kernels: its activation quantizer, the bytes of one token's
// quantized row, and its row dot (null: the format has none, or the float path was asked for).
struct Int8Kernel {
  quants::ActQuantFn quantize = nullptr;
  int64_t (*row_bytes)(int64_t cols) = nullptr;
  quants::RowDotFn dot = nullptr;
  // The tiled kernel for batches (bit for bit `dot` per row and token); null: rows only.
  quants::TileDotFn tile = nullptr;
};

Int8Kernel Int8KernelFor(GgmlType t, const MatMulOptions& o) {
  if (o.float_activations) return {};
  const quants::Q8AKernels& q8a = ActiveQ8A();
  if (quants::RowDotFn dot = quants::Q8ARowDot(q8a, t); dot != nullptr) {
    return {q8a.quantize, quants::Q8ARowBytes, dot, nullptr};
  }
  const quants::KQuantKernels& kq = ActiveKQuant();
  const quants::KQuantTileKernels* kt = ActiveKQuantTile();
  switch (t) {
    case GgmlType::kQ4_K:
      return {kq.quantize_q8k, quants::Q8KRowBytes, kq.q4_k, kt != nullptr ? kt->q4_k : nullptr};
    case GgmlType::kQ5_K:
      return {kq.quantize_q8k, quants::Q8KRowBytes, kq.q5_k, kt != nullptr ? kt->q5_k : nullptr};
    case GgmlType::kQ6_K:
      return {kq.quantize_q8k, quants::Q8KRowBytes, kq.q6_k, kt != nullptr ? kt->q6_k : nullptr};
    default:
      return {};
  }
}

// Weight tiles a worker takes together while a chunk of tokens passes over them, and the
// bytes of 8-bit token rows per chunk: both stay in L2 across the chunk (a prefill's reuse).
constexpr int64_t kInt8TilesPerBlock = 4;
constexpr int64_t kInt8ChunkBytes = 192 << 10;

// The 8-bit path (see matmul.h): quantize each token's row once, then every weight row against
// all of them. The workspace's matmul inputs hold 4 bytes per value; a quantized row, at most
// 1.25 (32-value blocks of 40 bytes; Q8_K: 292 bytes per 256).
void MatMulInt8(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                const CpuWorkspace& ws, const Int8Kernel& k) {
  const int64_t cols = w.cols;
  const int64_t row_bytes = k.row_bytes(cols);
  auto* acts = ws.Get<uint8_t>(CpuBuffer::kMatMulInput);
  float* gathered = ws.Get(CpuBuffer::kMatMulGather);
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * cols;
    if (!w.input_perm.empty()) {
      Gather(w, xt, gathered);
      xt = gathered;
    }
    k.quantize(xt, acts + t * row_bytes, cols);
  }
  const int64_t n_tiles = (w.rows + kMatMulTileRows - 1) / kMatMulTileRows;
  if (k.tile != nullptr && n_tokens > 1) {  // the tiled kernel blocks rows x tokens itself
    pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
      const int64_t r0 = begin * kMatMulTileRows, r1 = std::min(w.rows, end * kMatMulTileRows);
      k.tile(w.row(r0), static_cast<int64_t>(w.row_bytes), static_cast<int>(r1 - r0), acts,
             row_bytes, n_tokens, cols, y + r0, w.rows);
    });
    return;
  }
  const int chunk =
      static_cast<int>(std::clamp<int64_t>(kInt8ChunkBytes / row_bytes / 4 * 4, 4, 64));
  pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
    for (int64_t tile = begin; tile < end; tile += kInt8TilesPerBlock) {
      const int64_t r0 = tile * kMatMulTileRows;
      const int64_t r1 =
          std::min(w.rows, std::min(end, tile + kInt8TilesPerBlock) * kMatMulTileRows);
      for (int t0 = 0; t0 < n_tokens; t0 += chunk) {
        const int nt = std::min(chunk, n_tokens - t0);
        for (int64_t r = r0; r < r1; ++r) {
          k.dot(w.row(r), acts + t0 * row_bytes, row_bytes, nt, cols, y + t0 * w.rows + r, w.rows);
        }
      }
    }
  });
}

// The packed path (see matmul.h): each token's row quantized once as the packed kernel takes
// it, then even splits of whole 8-row groups, each worker's groups against all the tokens in
// one kernel call (the kernel blocks tokens itself).
void MatMulPacked(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                  const CpuWorkspace& ws, const PackedKernel& k) {
  const int64_t cols = w.cols;
  const int64_t row_bytes = k.act_row_bytes(cols);
  auto* acts = ws.Get<uint8_t>(CpuBuffer::kMatMulInput);
  float* gathered = ws.Get(CpuBuffer::kMatMulGather);
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * cols;
    if (!w.input_perm.empty()) {
      Gather(w, xt, gathered);
      xt = gathered;
    }
    k.quantize(xt, acts + t * row_bytes, cols);
  }
  const int64_t group_bytes = k.group_bytes(w.type, cols);
  const int64_t n_groups = (w.rows + kPackedGroupRows - 1) / kPackedGroupRows;
  pool.ParallelFor(n_groups, [&](int64_t begin, int64_t end, int) {
    const int64_t r0 = begin * kPackedGroupRows;
    const int64_t r1 = std::min(w.rows, end * kPackedGroupRows);
    k.dot(w.packed + begin * group_bytes, r1 - r0, acts, row_bytes, n_tokens, cols, y + r0, w.rows);
  });
}

}  // namespace

bool MatMulInt8Activations(GgmlType t, const MatMulOptions& o) {
  return Int8KernelFor(t, o).dot != nullptr;
}

absl::Status MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                    const CpuWorkspace& ws, const MatMulOptions& o) {
  if (absl::Status s = CheckWorkspace(w, n_tokens, pool, ws); !s.ok()) return s;
  if (w.packed != nullptr && !o.float_activations) {
    if (const PackedKernel k = PackedKernelFor(ActiveKernelSet(), w.type); k.dot != nullptr) {
      MatMulPacked(w, x, n_tokens, y, pool, ws, k);
      return absl::OkStatus();
    }
  }
  if (const Int8Kernel k = Int8KernelFor(w.type, o); k.dot != nullptr) {
    MatMulInt8(w, x, n_tokens, y, pool, ws, k);
    return absl::OkStatus();
  }
  const bool permuted = !w.input_perm.empty();
  float* inputs = ws.Get(CpuBuffer::kMatMulInput);
  const int64_t n_tiles = (w.rows + kMatMulTileRows - 1) / kMatMulTileRows;
  const int64_t cols = w.cols;
  // One token (and a few, for the plain float formats, whose fused DotRow costs no more than a
  // float dot): each row decoded in registers straight into its dot, token by token.
  const int batch_from = GgmlTypeInfoOf(w.type).block_size == 1 ? kPlainBatchFrom : 2;
  if (n_tokens < batch_from) {
    // The inputs in the stored column order, gathered once per token before any dot runs, so
    // every y[t][r] sees the same x'_t whatever the batch.
    if (permuted) {
      for (int t = 0; t < n_tokens; ++t) Gather(w, x + t * cols, inputs + t * cols);
      x = inputs;
    }
    pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int) {
      const int64_t r0 = begin * kMatMulTileRows, r1 = std::min(w.rows, end * kMatMulTileRows);
      for (int t = 0; t < n_tokens; ++t) {
        const float* xt = x + t * cols;
        float* yt = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) yt[r] = DotRow(w.type, w.row(r), xt, cols);
      }
    });
    return absl::OkStatus();
  }
  // A batch: every token's inputs and every weight row in the dot layout, each row decoded
  // once for all the tokens.
  float* xl = inputs;
  float* gathered = ws.Get(CpuBuffer::kMatMulGather);
  for (int t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * cols;
    if (permuted) {
      Gather(w, xt, gathered);
      xt = gathered;
    }
    ToDotLayout(xt, xl + t * cols, cols);
  }
  pool.ParallelFor(n_tiles, [&](int64_t begin, int64_t end, int thread) {
    float* wl = ws.Get(CpuBuffer::kMatMulTile, thread);
    for (int64_t tile = begin; tile < end; ++tile) {
      const int64_t r0 = tile * kMatMulTileRows, r1 = std::min(w.rows, r0 + kMatMulTileRows);
      for (int64_t r = r0; r < r1; ++r) {
        DequantizeRowDotLayout(w.type, w.row(r), wl + (r - r0) * cols, cols);
      }
      DotF32Tile(wl, cols, static_cast<int>(r1 - r0), xl, cols, n_tokens, cols, y + r0, w.rows);
    }
  });
  return absl::OkStatus();
}

}  // namespace pinfer
