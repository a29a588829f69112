#include "engine/cpu/matmul.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>

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
  const bool per_thread = ws.Get(CpuBuffer::kMatMulTile, pool.size() - 1) != nullptr &&
                          ws.Get(CpuBuffer::kMatMulGather, pool.size() - 1) != nullptr;
  if (cols * static_cast<uint64_t>(n_tokens) > ws.capacity(CpuBuffer::kMatMulInput) ||
      cols > ws.capacity(CpuBuffer::kMatMulGather) ||
      cols * kMatMulTileRows > ws.capacity(CpuBuffer::kMatMulTile) || !per_thread) {
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

// Chunks per thread of a shared-input call's weights (RunParts): enough that a slowed thread's
// share moves to the others, few enough that each chunk is many row groups (a 4096-row matrix
// cut 16 ways: 32 groups of 8 rows per chunk).
constexpr int64_t kChunksPerThread = 8;

// One matrix of a shared-input call on the 8-bit or the packed path, resolved to its kernels;
// its rows go in units (8-row groups packed, kMatMulTileRows-row tiles otherwise), the split's
// granularity.
struct Part {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  PackedKernel packed;  // packed.dot set: the packed path
  Int8Kernel int8;
  quants::ActQuantFn quantize = nullptr;
  int64_t act_row_bytes = 0;
  uint8_t* acts = nullptr;  // the tokens' quantized rows, act_row_bytes apart
  bool quantizes = false;   // the first part of its set: quantizes acts for the parts sharing it
  int64_t unit_rows = 0, units = 0, unit_bytes = 0;
};

// Resolves w's kernels on the 8-bit or packed path; false for the float path.
bool ResolvePart(const WeightMatrix& w, float* y, const MatMulOptions& o, Part* p) {
  p->w = &w;
  p->y = y;
  if (w.packed != nullptr && !o.float_activations) {
    p->packed = PackedKernelFor(ActiveKernelSet(), w.type);
    if (p->packed.dot != nullptr) {
      p->quantize = p->packed.quantize;
      p->act_row_bytes = p->packed.act_row_bytes(w.cols);
      p->unit_rows = kPackedGroupRows;
      p->unit_bytes = p->packed.group_bytes(w.type, w.cols);
      p->units = (w.rows + kPackedGroupRows - 1) / kPackedGroupRows;
      return true;
    }
  }
  p->int8 = Int8KernelFor(w.type, o);
  if (p->int8.dot == nullptr) return false;
  p->quantize = p->int8.quantize;
  p->act_row_bytes = p->int8.row_bytes(w.cols);
  p->unit_rows = kMatMulTileRows;
  p->unit_bytes = kMatMulTileRows * static_cast<int64_t>(w.row_bytes);
  p->units = (w.rows + kMatMulTileRows - 1) / kMatMulTileRows;
  return true;
}

// Units [u0, u1) of part p against all the tokens: the same kernel calls as MatMul of the
// matrix alone makes (each y element depends only on its row and token, not on the range).
void RunUnits(const Part& p, int64_t u0, int64_t u1, int n_tokens) {
  const WeightMatrix& w = *p.w;
  const int64_t cols = w.cols, row_bytes = p.act_row_bytes;
  const int64_t r0 = u0 * p.unit_rows, r1 = std::min(w.rows, u1 * p.unit_rows);
  if (r0 >= r1) return;
  if (p.packed.dot != nullptr) {
    p.packed.dot(w.packed + u0 * p.unit_bytes, r1 - r0, p.acts, row_bytes, n_tokens, cols, p.y + r0,
                 w.rows);
    return;
  }
  if (p.int8.tile != nullptr && n_tokens > 1) {  // the tiled kernel blocks rows x tokens itself
    p.int8.tile(w.row(r0), static_cast<int64_t>(w.row_bytes), static_cast<int>(r1 - r0), p.acts,
                row_bytes, n_tokens, cols, p.y + r0, w.rows);
    return;
  }
  const int chunk =
      static_cast<int>(std::clamp<int64_t>(kInt8ChunkBytes / row_bytes / 4 * 4, 4, 64));
  for (int64_t tile = u0; tile < u1; tile += kInt8TilesPerBlock) {
    const int64_t b0 = tile * kMatMulTileRows;
    const int64_t b1 = std::min(w.rows, std::min(u1, tile + kInt8TilesPerBlock) * kMatMulTileRows);
    for (int t0 = 0; t0 < n_tokens; t0 += chunk) {
      const int nt = std::min(chunk, n_tokens - t0);
      for (int64_t r = b0; r < b1; ++r) {
        p.int8.dot(w.row(r), p.acts + t0 * row_bytes, row_bytes, nt, cols, p.y + t0 * w.rows + r,
                   w.rows);
      }
    }
  }
}

// The parts' quantized activations in kMatMulInput: parts with the same quantizer, row bytes
// and input order share one set, each set quantized once (by the part whose `quantizes` is
// set). False (nothing written) when the sets do not fit the buffer (then each matrix goes
// alone); one set always fits (CheckWorkspace: the buffer holds 4 bytes per input value, a
// quantized row at most 1.25). The token rows are split evenly over the pool (one operation;
// a single token stays on the caller), each row quantized by the same call whatever the split,
// a permuted row gathered first into the thread's own copy of kMatMulGather.
bool QuantizeShared(std::span<Part> parts, const float* x, int n_tokens, ThreadPool& pool,
                    const CpuWorkspace& ws) {
  auto* base = ws.Get<uint8_t>(CpuBuffer::kMatMulInput);
  const uint64_t capacity = ws.bytes_per_copy(CpuBuffer::kMatMulInput);
  uint64_t used = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    Part& p = parts[i];
    p.quantizes = true;
    for (size_t j = 0; j < i && p.quantizes; ++j) {
      const Part& q = parts[j];
      if (q.quantize == p.quantize && q.act_row_bytes == p.act_row_bytes &&
          q.w->cols == p.w->cols && q.w->input_perm == p.w->input_perm) {
        p.acts = q.acts;
        p.quantizes = false;
      }
    }
    if (!p.quantizes) continue;
    used = (used + 63) / 64 * 64;  // each set on its own cache lines; the first at 0
    const uint64_t bytes = static_cast<uint64_t>(n_tokens) * static_cast<uint64_t>(p.act_row_bytes);
    if (used + bytes > capacity) return false;
    p.acts = base + used;
    used += bytes;
  }
  pool.ParallelFor(n_tokens, [&](int64_t t0, int64_t t1, int thread) {
    float* gathered = ws.Get(CpuBuffer::kMatMulGather, thread);
    for (const Part& p : parts) {
      if (!p.quantizes) continue;
      const int64_t cols = p.w->cols;
      for (int64_t t = t0; t < t1; ++t) {
        const float* xt = x + t * cols;
        if (!p.w->input_perm.empty()) {
          Gather(*p.w, xt, gathered);
          xt = gathered;
        }
        p.quantize(xt, p.acts + t * p.act_row_bytes, cols);
      }
    }
  });
  return true;
}

// Where the byte offset b of the parts' combined weights falls, rounded to the nearest unit
// boundary: (part, unit). Adjacent threads round their shared boundary the same way, so the
// shares tile the parts exactly.
std::pair<size_t, int64_t> UnitAt(std::span<const Part> parts, int64_t b) {
  for (size_t j = 0; j < parts.size(); ++j) {
    const int64_t bytes = parts[j].units * parts[j].unit_bytes;
    if (b < bytes) {
      const int64_t u = (b + parts[j].unit_bytes / 2) / parts[j].unit_bytes;
      return u < parts[j].units ? std::pair{j, u} : std::pair{j + 1, int64_t{0}};
    }
    b -= bytes;
  }
  return {parts.size(), 0};
}

// All the parts' units in one operation: the parts' combined weights cut into kChunksPerThread
// ranges of equal bytes per thread (rounded to unit boundaries), which the threads take from a
// shared counter (ParallelForDynamic), so a thread that the machine slows down (another
// process, a VM's stolen time) takes fewer of them instead of holding up the barrier. Each y
// element is still made by one kernel call over its whole row, whatever the chunks.
void RunParts(std::span<const Part> parts, int n_tokens, ThreadPool& pool) {
  int64_t total = 0;
  for (const Part& p : parts) total += p.units * p.unit_bytes;
  const int64_t chunks = pool.size() == 1 ? 1 : kChunksPerThread * pool.size();
  pool.ParallelForDynamic(
      chunks,
      [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {
          auto [j0, u0] = UnitAt(parts, total * i / chunks);
          const auto [j1, u1] = i + 1 == chunks ? std::pair{parts.size(), int64_t{0}}
                                                : UnitAt(parts, total * (i + 1) / chunks);
          for (size_t j = j0; j <= j1 && j < parts.size(); ++j) {
            const int64_t from = j == j0 ? u0 : 0, to = j == j1 ? u1 : parts[j].units;
            if (from < to) RunUnits(parts[j], from, to, n_tokens);
          }
        }
      },
      /*grain=*/1);
}

}  // namespace

bool MatMulInt8Activations(GgmlType t, const MatMulOptions& o) {
  return Int8KernelFor(t, o).dot != nullptr;
}

absl::Status MatMul(const WeightMatrix& w, const float* x, int n_tokens, float* y, ThreadPool& pool,
                    const CpuWorkspace& ws, const MatMulOptions& o) {
  if (absl::Status s = CheckWorkspace(w, n_tokens, pool, ws); !s.ok()) return s;
  if (Part p; ResolvePart(w, y, o, &p)) {
    QuantizeShared(std::span<Part>(&p, 1), x, n_tokens, pool, ws);  // one set always fits
    RunParts(std::span<const Part>(&p, 1), n_tokens, pool);
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
  // once for all the tokens. The inputs' rows split evenly over the pool by token, each thread
  // gathering into its own copy of kMatMulGather.
  float* xl = inputs;
  pool.ParallelFor(n_tokens, [&](int64_t t0, int64_t t1, int thread) {
    float* gathered = ws.Get(CpuBuffer::kMatMulGather, thread);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * cols;
      if (permuted) {
        Gather(w, xt, gathered);
        xt = gathered;
      }
      ToDotLayout(xt, xl + t * cols, cols);
    }
  });
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

absl::Status MatMulSameInput(std::span<const MatMulTarget> targets, const float* x, int n_tokens,
                             ThreadPool& pool, const CpuWorkspace& ws, const MatMulOptions& o) {
  constexpr size_t kMaxParts = 4;
  for (const MatMulTarget& t : targets) {
    if (absl::Status s = CheckWorkspace(*t.w, n_tokens, pool, ws); !s.ok()) return s;
  }
  Part parts[kMaxParts];
  bool fused = targets.size() <= kMaxParts && n_tokens > 0;
  for (size_t i = 0; fused && i < targets.size(); ++i) {
    fused = ResolvePart(*targets[i].w, targets[i].y, o, &parts[i]) &&
            targets[i].w->cols == targets[0].w->cols;
  }
  if (fused) fused = QuantizeShared(std::span<Part>(parts, targets.size()), x, n_tokens, pool, ws);
  if (fused) {
    RunParts(std::span<const Part>(parts, targets.size()), n_tokens, pool);
    return absl::OkStatus();
  }
  for (const MatMulTarget& t : targets) {  // the float path, or sets that do not fit
    if (absl::Status s = MatMul(*t.w, x, n_tokens, t.y, pool, ws, o); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace pinfer
