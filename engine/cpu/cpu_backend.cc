#include "engine/cpu/cpu_backend.h"

#include <cmath>

#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "kvcache/attention.h"
#include "kvcache/kv_codec.h"
#include "loaders/quants.h"

namespace pinfer {

uint64_t CpuBackend::WorkspaceFloats(const ModelConfig& c, int max_tokens) {
  const uint64_t per_token = 3ull * c.dim + 2ull * c.q_dim() + 2ull * c.kv_dim() + 2ull * c.n_ff;
  return per_token * static_cast<uint64_t>(max_tokens);
}

uint64_t CpuBackend::WorkspaceBytes() const {
  uint64_t scratch = 0;
  for (const auto& s : scratch_) scratch += s.capacity();
  return (WorkspaceFloats(model_.config(), max_tokens_) + scratch) * sizeof(float);
}

CpuBackend::CpuBackend(const Model& model, int max_tokens, int n_threads)
    : model_(model), max_tokens_(max_tokens), pool_(n_threads) {
  const ModelConfig& c = model.config();
  const size_t t = static_cast<size_t>(max_tokens);
  x_.resize(t * c.dim);
  xb_.resize(t * c.dim);
  q_.resize(t * c.q_dim());
  k_.resize(t * c.kv_dim());
  v_.resize(t * c.kv_dim());
  att_.resize(t * c.q_dim());
  proj_.resize(t * c.dim);
  gate_.resize(t * c.n_ff);
  up_.resize(t * c.n_ff);
  scratch_.resize(static_cast<size_t>(pool_.size()));
}

void CpuBackend::Attention(const ForwardBatch& batch, const KvCache& cache, int layer) {
  const ModelConfig& c = model_.config();
  // With a query scale the scores are not scaled again (q was, after RoPE).
  AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim,
                       c.query_scale > 0 ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  shape.window = c.layer(layer).window;
  shape.softcap = c.attn_softcap;
  const int64_t items = static_cast<int64_t>(batch.size()) * c.n_kv_heads;
  pool_.ParallelFor(
      items,
      [&](int64_t begin, int64_t end, int thread) {
        std::vector<float>& scratch = scratch_[static_cast<size_t>(thread)];
        for (int64_t item = begin; item < end; ++item) {
          const int t = static_cast<int>(item / c.n_kv_heads);
          const int kv = static_cast<int>(item % c.n_kv_heads);
          const size_t need = AttentionScratchFloats(shape);
          if (scratch.size() < need) scratch.resize(need);
          AttendOne(cache, batch.seq_ids[t], layer, shape, q_.data() + (size_t)t * c.q_dim(),
                    batch.positions[t] + 1, kv, kv + 1, att_.data() + (size_t)t * c.q_dim(),
                    scratch.data());
        }
      },
      1);
}

void CpuBackend::QkvIntoCache(const ForwardBatch& batch, KvCache& cache, int l) {
  const ModelConfig& c = model_.config();
  const LayerWeights& L = model_.weights().layers[static_cast<size_t>(l)];
  const LayerAttention la = c.layer(l);
  const int n = batch.size();
  MatMul(L.wq, xb_.data(), n, q_.data(), pool_);
  MatMul(L.wk, xb_.data(), n, k_.data(), pool_);
  MatMul(L.wv, xb_.data(), n, v_.data(), pool_);
  const float* factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
  const KvDtype kv_dtype = cache.config().dtype;
  for (int t = 0; t < n; ++t) {
    float* q = q_.data() + (size_t)t * c.q_dim();
    float* k = k_.data() + (size_t)t * c.kv_dim();
    float* v = v_.data() + (size_t)t * c.kv_dim();
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
    ApplyRope(q, c.n_heads, c.head_dim, pos, la.rope_theta, c.rope_style, la.rope_freq_scale,
              factors, c.n_rot);
    ApplyRope(k, c.n_kv_heads, c.head_dim, pos, la.rope_theta, c.rope_style, la.rope_freq_scale,
              factors, c.n_rot);
    if (c.query_scale > 0) Scale(q, c.q_dim(), c.query_scale);
    KvEncodeRow(kv_dtype, k, cache.TokenRow(batch.seq_ids[t], pos, l, 0), c.kv_dim());
    KvEncodeRow(kv_dtype, v, cache.TokenRow(batch.seq_ids[t], pos, l, 1), c.kv_dim());
  }
}

// Adds proj_ (the attention or FFN output of n tokens) into the residual stream, through the
// post-norm first when the model has one.
void CpuBackend::AddResidual(int n, const std::vector<float>& post_norm) {
  const ModelConfig& c = model_.config();
  if (!post_norm.empty()) {
    for (int t = 0; t < n; ++t) {
      float* p = proj_.data() + (size_t)t * c.dim;
      RmsNorm(p, post_norm.data(), c.dim, c.rms_eps, p);
    }
  }
  AddInPlace(x_.data(), proj_.data(), (int64_t)n * c.dim);
}

void CpuBackend::NormInto(int n, const std::vector<float>& w) {
  const ModelConfig& c = model_.config();
  for (int t = 0; t < n; ++t) {
    RmsNorm(x_.data() + (size_t)t * c.dim, w.data(), c.dim, c.rms_eps,
            xb_.data() + (size_t)t * c.dim);
  }
}

void CpuBackend::Embed(const ForwardBatch& batch) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const float embed_scale = std::sqrt(static_cast<float>(c.dim));
  for (int t = 0; t < batch.size(); ++t) {
    float* x = x_.data() + (size_t)t * c.dim;
    DequantizeRow(w.tok_embd.type, w.tok_embd.row(batch.tokens[t]), x, c.dim);
    if (c.scale_embeddings) Scale(x, c.dim, embed_scale);
  }
}

absl::Status CpuBackend::Forward(const ForwardBatch& batch, KvCache& cache, float* logits) {
  const ModelConfig& c = model_.config();
  const ModelWeights& w = model_.weights();
  const int n = batch.size();
  if (n == 0) return absl::OkStatus();
  if (absl::Status s = ValidateBatch(batch, cache, c.n_vocab, max_tokens_); !s.ok()) return s;
  Embed(batch);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    NormInto(n, L.attn_norm);
    QkvIntoCache(batch, cache, l);
    Attention(batch, cache, l);
    MatMul(L.wo, att_.data(), n, proj_.data(), pool_);
    AddResidual(n, L.attn_post_norm);
    NormInto(n, L.ffn_norm);
    MatMul(L.w_gate, xb_.data(), n, gate_.data(), pool_);
    MatMul(L.w_up, xb_.data(), n, up_.data(), pool_);
    if (c.ffn_act == FfnActivation::kGeluTanh) {
      GeGlu(gate_.data(), up_.data(), (int64_t)n * c.n_ff);
    } else {
      SwiGlu(gate_.data(), up_.data(), (int64_t)n * c.n_ff);
    }
    MatMul(L.w_down, gate_.data(), n, proj_.data(), pool_);
    AddResidual(n, L.ffn_post_norm);
  }
  // Final norm and the output projection, only for the rows whose logits are wanted.
  const int n_out = static_cast<int>(batch.logit_rows.size());
  for (int i = 0; i < n_out; ++i) {
    RmsNorm(x_.data() + (size_t)batch.logit_rows[i] * c.dim, w.output_norm.data(), c.dim, c.rms_eps,
            xb_.data() + (size_t)i * c.dim);
  }
  if (n_out > 0) MatMul(w.output, xb_.data(), n_out, logits, pool_);
  if (n_out > 0 && c.final_softcap > 0) {
    SoftCap(logits, static_cast<int64_t>(n_out) * c.n_vocab, c.final_softcap);
  }
  return absl::OkStatus();
}

}  // namespace pinfer
