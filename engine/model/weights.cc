#include "engine/model/weights.h"

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "loaders/quants.h"

namespace pinfer {

uint64_t ModelWeights::total_bytes() const {
  uint64_t total = 0;
  for (const auto& [type, bytes] : bytes_by_type) total += bytes;
  return total;
}

absl::StatusOr<std::vector<float>> ToFloatVector(GgmlType type, const uint8_t* data, int64_t n) {
  const GgmlTypeInfo& info = GgmlTypeInfoOf(type);
  if (!info.supported || n % info.block_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read a vector of ", n, " values stored as ", Sv(info.name)));
  }
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(type, data, out.data(), n);
  return out;
}

WeightMatrix MatrixView(std::string name, GgmlType type, int64_t rows, int64_t cols,
                        const uint8_t* data) {
  WeightMatrix m;
  m.name = std::move(name);
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = GgmlRowBytes(type, cols);
  m.data = data;
  return m;
}

WeightMatrix RowView(const WeightMatrix& m, int64_t begin, int64_t rows, std::string name) {
  WeightMatrix v = m;
  v.name = std::move(name);
  v.rows = rows;
  v.data = m.data + static_cast<size_t>(begin) * m.row_bytes;
  v.packed = nullptr;  // a view is repacked as a matrix of its own
  return v;
}

namespace {

class Binder {
 public:
  Binder(const GgufFile& f, ModelWeights& w) : f_(f), w_(w) {}

  // A tensor with dims {cols, rows} in ggml order.
  absl::Status Matrix(const std::string& name, int64_t rows, int64_t cols, WeightMatrix* out) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return Missing(name);
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      return Shape(*t, absl::StrCat("[", cols, ", ", rows, "]"));
    }
    const GgmlTypeInfo& info = GgmlTypeInfoOf(t->type);
    if (!info.supported) {
      return absl::UnimplementedError(absl::StrCat(
          "tensor '", name, "' is stored as ", Sv(info.name),
          ", which this engine cannot multiply; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
          "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (requantize with `pagedinfer quantize`)"));
    }
    *out = MatrixView(name, t->type, rows, cols, f_.data(*t));
    w_.bytes_by_type[t->type] += t->nbytes;
    return absl::OkStatus();
  }

  bool Has(const std::string& name) const { return f_.FindTensor(name) != nullptr; }

  absl::Status Vector(const std::string& name, int64_t n, std::vector<float>* out,
                      bool optional = false) {
    const GgufTensorInfo* t = f_.FindTensor(name);
    if (t == nullptr) return optional ? absl::OkStatus() : Missing(name);
    if (t->n_elements() != n) return Shape(*t, absl::StrCat("[", n, "]"));
    auto v = ToFloatVector(t->type, f_.data(*t), n);
    if (!v.ok()) return v.status();
    *out = std::move(*v);
    w_.bytes_by_type[t->type] += t->nbytes;
    return absl::OkStatus();
  }

 private:
  absl::Status Missing(const std::string& name) {
    return absl::NotFoundError(absl::StrCat("model file ", f_.path(), " has no tensor '", name,
                                            "'; is it a llama-family model?"));
  }
  absl::Status Shape(const GgufTensorInfo& t, const std::string& want) {
    std::string dims;
    for (int64_t d : t.dims) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' has shape [", dims,
                                                   "], expected ", want,
                                                   " from the model's hyper-parameters"));
  }

  const GgufFile& f_;
  ModelWeights& w_;
};

// Q, K and V: separate tensors, or one attn_qkv (phi3; llama.cpp accepts it for any
// architecture) bound as three row views.
absl::Status BindQkv(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* l) {
  if (!b.Has(p + "attn_qkv.weight")) {
    absl::Status s = b.Matrix(p + "attn_q.weight", c.q_dim(), c.dim, &l->wq);
    if (s.ok()) s = b.Matrix(p + "attn_k.weight", c.kv_dim(), c.dim, &l->wk);
    if (s.ok()) s = b.Matrix(p + "attn_v.weight", c.kv_dim(), c.dim, &l->wv);
    return s;
  }
  WeightMatrix qkv;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  if (absl::Status s = b.Matrix(p + "attn_qkv.weight", q + 2 * kv, c.dim, &qkv); !s.ok()) return s;
  l->wq = RowView(qkv, 0, q, p + "attn_qkv.weight[q]");
  l->wk = RowView(qkv, q, kv, p + "attn_qkv.weight[k]");
  l->wv = RowView(qkv, q + kv, kv, p + "attn_qkv.weight[v]");
  return absl::OkStatus();
}

// Gate and up: separate tensors, or (phi3) one ffn_up of 2 x n_ff rows, gate first.
absl::Status BindGateUp(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* l) {
  if (c.arch != "phi3") {
    absl::Status s = b.Matrix(p + "ffn_gate.weight", c.n_ff, c.dim, &l->w_gate);
    if (s.ok()) s = b.Matrix(p + "ffn_up.weight", c.n_ff, c.dim, &l->w_up);
    return s;
  }
  WeightMatrix up;
  if (absl::Status s = b.Matrix(p + "ffn_up.weight", 2 * c.n_ff, c.dim, &up); !s.ok()) return s;
  l->w_gate = RowView(up, 0, c.n_ff, p + "ffn_up.weight[gate]");
  l->w_up = RowView(up, c.n_ff, c.n_ff, p + "ffn_up.weight[up]");
  return absl::OkStatus();
}

absl::Status BindLayer(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* l) {
  absl::Status s = b.Vector(p + "attn_norm.weight", c.dim, &l->attn_norm);
  if (s.ok()) s = BindQkv(b, c, p, l);
  if (s.ok()) s = b.Matrix(p + "attn_output.weight", c.dim, c.q_dim(), &l->wo);
  if (s.ok()) s = b.Vector(p + "ffn_norm.weight", c.dim, &l->ffn_norm);
  if (s.ok()) s = BindGateUp(b, c, p, l);
  if (s.ok()) s = b.Matrix(p + "ffn_down.weight", c.dim, c.n_ff, &l->w_down);
  if (s.ok()) s = b.Vector(p + "attn_q.bias", c.q_dim(), &l->bq, !c.qkv_bias);
  if (s.ok()) s = b.Vector(p + "attn_k.bias", c.kv_dim(), &l->bk, !c.qkv_bias);
  if (s.ok()) s = b.Vector(p + "attn_v.bias", c.kv_dim(), &l->bv, !c.qkv_bias);
  if (s.ok() && c.qk_norm) {
    s = b.Vector(p + "attn_q_norm.weight", c.head_dim, &l->q_norm);
    if (s.ok()) s = b.Vector(p + "attn_k_norm.weight", c.head_dim, &l->k_norm);
  }
  if (s.ok() && c.post_norms) {
    s = b.Vector(p + "post_attention_norm.weight", c.dim, &l->attn_post_norm);
    if (s.ok()) s = b.Vector(p + "post_ffw_norm.weight", c.dim, &l->ffn_post_norm);
  }
  return s;
}

}  // namespace

absl::StatusOr<ModelWeights> WeightsFromGguf(const GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  Binder b(f, w);
  absl::Status s = b.Matrix("token_embd.weight", c.n_vocab, c.dim, &w.tok_embd);
  if (s.ok()) s = b.Vector("output_norm.weight", c.dim, &w.output_norm);
  if (s.ok()) {
    s = c.tied_embeddings ? absl::OkStatus()
                          : b.Matrix("output.weight", c.n_vocab, c.dim, &w.output);
  }
  if (!s.ok()) return s;
  if (c.tied_embeddings) w.output = w.tok_embd;
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int i = 0; i < c.n_layers && s.ok(); ++i) {
    s = BindLayer(b, c, absl::StrCat("blk.", i, "."), &w.layers[static_cast<size_t>(i)]);
  }
  if (!s.ok()) return s;
  return w;
}

}  // namespace pinfer
