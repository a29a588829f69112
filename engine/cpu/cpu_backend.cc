#include "engine/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "kvcache/attention.h"
#include "kvcache/kv_codec.h"
#include "loaders/byte_size.h"
#include "loaders/host_memory.h"
#include "loaders/kernel_set.h"
#include "loaders/quants.h"

namespace pinfer {

CpuBackend::CpuBackend(const Model& model, int max_tokens, int n_threads, bool repack)
    : model_(model), max_tokens_(max_tokens), pool_(n_threads), repack_(repack) {
  if (repack_) repack_plan_ = PlanRepack(model_, ActiveKernelSet());
}

CpuBackend::~CpuBackend() = default;

const WeightMatrix& CpuBackend::Mat(const WeightMatrix& m) const {
  if (packed_.empty()) return m;
  auto it = packed_.find(&m);
  return it == packed_.end() ? m : it->second;
}

std::vector<Model::WeightRange> CpuBackend::RangesNow() const {
  if (!packed_memory_) return model_.WeightRanges();
  std::vector<Model::WeightRange> ranges = model_.WeightRanges(repack_plan_.matrices);
  ranges.push_back({packed_memory_->data(), packed_memory_->size(), /*mapped=*/false});
  std::sort(
      ranges.begin(), ranges.end(),
      [](const Model::WeightRange& a, const Model::WeightRange& b) { return a.data < b.data; });
  return ranges;
}

absl::Status CpuBackend::Repack(bool lock_memory) {
  const auto start = std::chrono::steady_clock::now();
  auto mem = CommittedMemory::Allocate(
      repack_plan_.packed_bytes, {.huge_pages = true, .lock = lock_memory}, "the repacked weights");
  if (!mem.ok()) return mem.status();
  packed_memory_ = *std::move(mem);
  uint8_t* dst = packed_memory_->data();
  for (size_t i = 0; i < repack_plan_.matrices.size(); ++i) {
    const WeightMatrix* m = repack_plan_.matrices[i];
    const PackedKernel k = PackedKernelFor(ActiveKernelSet(), m->type);
    const int64_t group_bytes = k.group_bytes(m->type, m->cols);
    const int64_t n_groups = (m->rows + kPackedGroupRows - 1) / kPackedGroupRows;
    pool_.ParallelFor(n_groups, [&](int64_t begin, int64_t end, int) {
      const int64_t r0 = begin * kPackedGroupRows;
      const int64_t r1 = std::min(m->rows, end * kPackedGroupRows);
      k.pack(m->type, m->row(r0), static_cast<int64_t>(m->row_bytes), r1 - r0, m->cols,
             dst + begin * group_bytes);
    });
    // The file's layout of this matrix is no longer read: its pages go now, so resident
    // memory holds both layouts of one matrix at most.
    ReleaseFilePages(m->data, static_cast<size_t>(m->bytes()));
    WeightMatrix copy = *m;
    copy.packed = dst;
    packed_.emplace(m, std::move(copy));
    dst += repack_plan_.matrix_bytes[i];
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  repack_summary_ = absl::StrFormat(
      "repacked %d matrices (%s) for %s in %.2f s", repack_plan_.matrices.size(),
      FormatBytes(repack_plan_.packed_bytes), KernelSetName(ActiveKernelSet()), took);
  return absl::OkStatus();
}

std::string CpuBackend::RepackSummary() const {
  if (!repack_) return "file layout (--no-repack)";
  if (repack_plan_.matrices.empty()) {
    return absl::StrCat("file layout (no packed kernels for these formats in ",
                        KernelSetName(ActiveKernelSet()), ")");
  }
  return repack_summary_.empty() ? "to be repacked at Commit" : repack_summary_;
}

uint64_t CpuBackend::WorkspaceBytes() const { return ws_ ? ws_->bytes() : 0; }

absl::Status CpuBackend::ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) {
  (void)max_num_seqs;
  (void)block_size;
  if (max_model_len < 1 || max_tokens_ < 1) {
    return absl::InvalidArgumentError(absl::StrCat("CPU backend limits must be positive (",
                                                   max_tokens_, " tokens per step, max_model_len ",
                                                   max_model_len, ")"));
  }
  layout_ = CpuWorkspaceLayout(model_.config(), {max_tokens_, pool_.size()});
  return absl::OkStatus();
}

absl::Status CpuBackend::Commit(bool lock_memory) {
  if (layout_.empty()) {
    return absl::FailedPreconditionError("CpuBackend::Commit before ReserveForLimits");
  }
  const auto start = std::chrono::steady_clock::now();
  lock_memory_ = lock_memory;
  if (!repack_plan_.matrices.empty() && !packed_memory_) {
    if (absl::Status s = Repack(lock_memory); !s.ok()) return s;
  }
  weight_ranges_ = RangesNow();
  uint64_t weight_bytes = 0;
  for (const Model::WeightRange& r : weight_ranges_) {
    weight_bytes += r.bytes;
    absl::Status s =
        lock_memory ? LockPages(r.data, r.bytes, "the weights") : PopulateForRead(r.data, r.bytes);
    if (!s.ok()) return s;
  }
  if (!ws_ || ws_->layout().size() != layout_.size() || ws_->bytes() != LayoutBytes(layout_)) {
    ws_.reset();
    auto ws = CpuWorkspace::Create(layout_, {.huge_pages = false, .lock = lock_memory});
    if (!ws.ok()) return ws.status();
    ws_ = *std::move(ws);
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  commit_summary_ = absl::StrFormat("weights %s paged in%s and workspace %s committed in %.2f s",
                                    FormatBytes(weight_bytes), lock_memory ? " and locked" : "",
                                    FormatBytes(ws_->bytes()), took);
  if (!repack_summary_.empty()) {
    commit_summary_ =
        absl::StrCat(repack_summary_, ", their file pages released; ", commit_summary_);
  }
  return absl::OkStatus();
}

WeightResidency CpuBackend::Weights() const {
  WeightResidency w;
  const std::vector<Model::WeightRange> ranges =
      weight_ranges_.empty() ? RangesNow() : weight_ranges_;
  for (const Model::WeightRange& r : ranges) {
    w.bytes += r.bytes;
    w.resident += ResidentPageBytes(r.data, r.bytes);
    if (r.mapped) w.mapped += r.bytes;
  }
  if (packed_memory_) w.repacked = packed_memory_->size();
  w.locked = lock_memory_ && ws_ != nullptr;
  return w;
}

absl::StatusOr<std::unique_ptr<KvStorage>> CpuBackend::MakeKvStorage(size_t block_bytes,
                                                                     int64_t num_blocks) {
  return KvCache::CommittedHostStorage(block_bytes, num_blocks,
                                       {.huge_pages = true, .lock = lock_memory_});
}

void CpuBackend::Attention(const ForwardBatch& batch, const KvCache& cache, int layer) {
  const ModelConfig& c = model_.config();
  // With a query scale the scores are not scaled again (q was, after RoPE).
  AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim,
                       c.query_scale > 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  shape.window = c.layer(layer).window;
  shape.softcap = c.attn_softcap;
  // Items of one token's run of `per` kv heads (KvHeadsPerItem: adjacent bytes of each row),
  // taken in dynamic chunks of one: the tokens' contexts differ in length.
  const int per = KvHeadsPerItem(c.n_kv_heads, batch.size(), pool_.size());
  const int per_token = c.n_kv_heads / per;
  const int64_t items = static_cast<int64_t>(batch.size()) * per_token;
  const float* q = Buf(CpuBuffer::kQ);
  float* att = Buf(CpuBuffer::kAttnOut);
  pool_.ParallelForDynamic(
      items,
      [&](int64_t begin, int64_t end, int thread) {
        float* scratch = ws_->Get(CpuBuffer::kAttentionScores, thread);
        for (int64_t item = begin; item < end; ++item) {
          const int t = static_cast<int>(item / per_token);
          const int kv = static_cast<int>(item % per_token) * per;
          AttendOne(cache, batch.seq_ids[t], layer, shape, q + (size_t)t * c.q_dim(),
                    batch.positions[t] + 1, kv, kv + per, att + (size_t)t * c.q_dim(), scratch);
        }
      },
      1);
}

absl::Status CpuBackend::QkvIntoCache(const ForwardBatch& batch, KvCache& cache, int l) {
  const LayerWeights& L = model_.weights().layers[static_cast<size_t>(l)];
  const int n = batch.size();
  const float* xb = Buf(CpuBuffer::kNormed);
  float *qb = Buf(CpuBuffer::kQ), *kb = Buf(CpuBuffer::kK), *vb = Buf(CpuBuffer::kV);
  const MatMulTarget qkv[] = {{&Mat(L.wq), qb}, {&Mat(L.wk), kb}, {&Mat(L.wv), vb}};
  if (absl::Status s = MatMulSameInput(qkv, xb, n, pool_, *ws_, matmul_); !s.ok()) return s;
  const KvDtype kv_dtype = cache.config().dtype;
  // Token rows split over the pool: each token writes its own q, k, v rows and its own KV
  // slots (the step's tokens name distinct (sequence, position) slots).
  pool_.ParallelFor(n, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) QkvRow(batch, cache, l, static_cast<int>(t), kv_dtype);
  });
  return absl::OkStatus();
}

void CpuBackend::QkvRow(const ForwardBatch& batch, KvCache& cache, int l, int t, KvDtype kv_dtype) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.weights().layers[static_cast<size_t>(l)];
  const LayerAttention la = c.layer(l);
  const float* factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  float* q = Buf(CpuBuffer::kQ) + (size_t)t * c.q_dim();
  float* k = Buf(CpuBuffer::kK) + (size_t)t * c.kv_dim();
  float* v = Buf(CpuBuffer::kV) + (size_t)t * c.kv_dim();
  if (c.qkv_bias) {
    AddInPlace(q, L.bq.data(), c.q_dim());
    AddInPlace(k, L.bk.data(), c.kv_dim());
    AddInPlace(v, L.bv.data(), c.kv_dim());
  }
  if (c.qk_norm) {  // RMSNorm over each head, before RoPE
    for (int h = 0; h < c.n_heads; ++h) {
      RmsNorm(q + h * c.head_dim, L.q_norm.data(), c.head_dim, c.rms_eps, q + h * c.head_dim);
    }
    for (int h = 0; h < c.n_kv_heads; ++h) {
      RmsNorm(k + h * c.head_dim, L.k_norm.data(), c.head_dim, c.rms_eps, k + h * c.head_dim);
    }
  }
  const int pos = batch.positions[t];
  ApplyRope(q, c.n_heads, c.head_dim, pos, la.rope_theta, c.rope_style, la.rope_freq_scale, factors,
            c.n_rot);
  ApplyRope(k, c.n_kv_heads, c.head_dim, pos, la.rope_theta, c.rope_style, la.rope_freq_scale,
            factors, c.n_rot);
  if (c.query_scale > 0) Scale(q, c.q_dim(), c.query_scale);
  KvEncodeRow(kv_dtype, k, cache.TokenRow(batch.seq_ids[t], pos, l, 0), c.kv_dim());
  KvEncodeRow(kv_dtype, v, cache.TokenRow(batch.seq_ids[t], pos, l, 1), c.kv_dim());
}

void CpuBackend::AddResidualRow(int t, const std::vector<float>& post_norm) {
  const ModelConfig& c = model_.config();
  float* p = Buf(CpuBuffer::kProj) + (size_t)t * c.dim;
  if (!post_norm.empty()) RmsNorm(p, post_norm.data(), c.dim, c.rms_eps, p);
  AddInPlace(Buf(CpuBuffer::kResidual) + (size_t)t * c.dim, p, c.dim);
}

void CpuBackend::NormRow(int t, const std::vector<float>& w) {
  const ModelConfig& c = model_.config();
  RmsNorm(Buf(CpuBuffer::kResidual) + (size_t)t * c.dim, w.data(), c.dim, c.rms_eps,
          Buf(CpuBuffer::kNormed) + (size_t)t * c.dim);
}

void CpuBackend::AddResidualAndNorm(int n, const std::vector<float>& post_norm,
                                    const std::vector<float>* norm) {
  pool_.ParallelFor(n, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      AddResidualRow(static_cast<int>(t), post_norm);
      if (norm != nullptr) NormRow(static_cast<int>(t), *norm);
    }
  });
}

void CpuBackend::EmbedAndNorm(const ForwardBatch& batch, const std::vector<float>* norm) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const float embed_scale = std::sqrt(static_cast<float>(c.dim));
  pool_.ParallelFor(batch.size(), [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      float* x = Buf(CpuBuffer::kResidual) + (size_t)t * c.dim;
      DequantizeRow(w.tok_embd.type, w.tok_embd.row(batch.tokens[t]), x, c.dim);
      if (c.scale_embeddings) Scale(x, c.dim, embed_scale);
      if (norm != nullptr) NormRow(static_cast<int>(t), *norm);
    }
  });
}

absl::Status CpuBackend::CheckStep(const ForwardBatch& batch, const KvCache& cache) const {
  if (!ws_) {
    return absl::FailedPreconditionError(
        "the CPU backend's workspace is not allocated: call ReserveForLimits and Commit first "
        "(Engine::Create does)");
  }
  if (batch.size() > max_tokens_) {
    return absl::FailedPreconditionError(
        absl::StrCat("a step of ", batch.size(),
                     " tokens needs more than the workspace line holds: it was committed at "
                     "start for ",
                     max_tokens_, " tokens per step (max_num_batched_tokens)"));
  }
  return ValidateBatch(batch, cache, model_.config().n_vocab, max_tokens_);
}

absl::Status CpuBackend::Layer(const ForwardBatch& batch, KvCache& cache, int l) {
  const ModelConfig& c = model_.config();
  const std::vector<LayerWeights>& layers = model_.weights().layers;
  const LayerWeights& L = layers[static_cast<size_t>(l)];
  const int n = batch.size();
  const float* xb = Buf(CpuBuffer::kNormed);
  float *proj = Buf(CpuBuffer::kProj), *gate = Buf(CpuBuffer::kGate), *up = Buf(CpuBuffer::kUp);
  if (absl::Status s = QkvIntoCache(batch, cache, l); !s.ok()) return s;
  Attention(batch, cache, l);
  if (absl::Status s = MatMul(Mat(L.wo), Buf(CpuBuffer::kAttnOut), n, proj, pool_, *ws_, matmul_);
      !s.ok()) {
    return s;
  }
  AddResidualAndNorm(n, L.attn_post_norm, &L.ffn_norm);
  const MatMulTarget ffn[] = {{&Mat(L.w_gate), gate}, {&Mat(L.w_up), up}};
  if (absl::Status s = MatMulSameInput(ffn, xb, n, pool_, *ws_, matmul_); !s.ok()) return s;
  const bool gelu = c.ffn_act == FfnActivation::kGeluTanh;
  pool_.ParallelFor(n, [&](int64_t t0, int64_t t1, int) {
    const int64_t i0 = t0 * c.n_ff, count = (t1 - t0) * c.n_ff;
    if (gelu) {
      GeGlu(gate + i0, up + i0, count);
    } else {
      SwiGlu(gate + i0, up + i0, count);
    }
  });
  if (absl::Status s = MatMul(Mat(L.w_down), gate, n, proj, pool_, *ws_, matmul_); !s.ok())
    return s;
  const bool last = l + 1 == c.n_layers;
  AddResidualAndNorm(n, L.ffn_post_norm, last ? nullptr : &layers[(size_t)l + 1].attn_norm);
  return absl::OkStatus();
}

absl::Status CpuBackend::Forward(const ForwardBatch& batch, KvCache& cache, float* logits) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  if (batch.size() == 0) return absl::OkStatus();
  if (absl::Status s = CheckStep(batch, cache); !s.ok()) return s;
  EmbedAndNorm(batch, c.n_layers > 0 ? &w.layers[0].attn_norm : nullptr);
  for (int l = 0; l < c.n_layers; ++l) {
    if (absl::Status s = Layer(batch, cache, l); !s.ok()) return s;
  }
  // Final norm and the output projection, only for the rows whose logits are wanted.
  const float* x = Buf(CpuBuffer::kResidual);
  float* xb = Buf(CpuBuffer::kNormed);
  const int n_out = static_cast<int>(batch.logit_rows.size());
  if (n_out == 0) return absl::OkStatus();
  pool_.ParallelFor(n_out, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      RmsNorm(x + (size_t)batch.logit_rows[i] * c.dim, w.output_norm.data(), c.dim, c.rms_eps,
              xb + (size_t)i * c.dim);
    }
  });
  if (absl::Status s = MatMul(Mat(w.output), xb, n_out, logits, pool_, *ws_, matmul_); !s.ok())
    return s;
  if (c.final_softcap > 0) {
    pool_.ParallelFor(n_out, [&](int64_t i0, int64_t i1, int) {
      SoftCap(logits + i0 * c.n_vocab, (i1 - i0) * c.n_vocab, c.final_softcap);
    });
  }
  return absl::OkStatus();
}

}  // namespace pinfer
