// Model::FromHfFolder: a Hugging Face model folder bound to the engine's weights. F32/F16/BF16
// tensors stay in the memory-mapped safetensors files (the kernels read unaligned rows);
// GPTQ/AWQ 4-bit layers are repacked at load into Q4_1 rows owned by the Model.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/model/hf_architecture.h"
#include "engine/model/hf_config.h"
#include "engine/model/model.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"
#include "loaders/gptq.h"
#include "loaders/hf_tokenizer.h"
#include "loaders/json_strict.h"
#include "loaders/safetensors.h"

namespace pinfer {
namespace {

namespace fs = std::filesystem;

// The whole file, refused before reading when it is larger than max_bytes.
absl::StatusOr<std::string> ReadText(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes; at most ", max_bytes, " are accepted"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class HfBinder {
 public:
  HfBinder(const SafetensorsModel& st, const std::optional<QuantConfig>& quant, ModelWeights& w,
           std::vector<std::vector<uint8_t>>& owned, std::vector<StoredTensor>& stored)
      : st_(st), quant_(quant), w_(w), owned_(owned), stored_(stored) {}

  // `hf` is the HF stem ("model.layers.0.self_attn.q_proj"), `gguf` the engine's stem.
  absl::Status Matrix(const std::string& hf, const std::string& gguf, int64_t rows, int64_t cols,
                      WeightMatrix* out) {
    if (st_.Find(hf + ".qweight") != nullptr) return Packed(hf, gguf, rows, cols, out);
    const StTensor* t = st_.Find(hf + ".weight");
    if (t == nullptr) return Missing(hf + ".weight");
    used_.insert(t->name);
    if (t->shape.size() != 2 || t->shape[0] != rows || t->shape[1] != cols) {
      return Shape(*t, absl::StrCat("[", rows, ", ", cols, "]"));
    }
    absl::StatusOr<GgmlType> type = FloatType(*t);
    if (!type.ok()) return type.status();
    *out = MatrixView(gguf + ".weight", *type, rows, cols, t->data);
    Count(out->name, *type, rows * cols, t->nbytes);
    return absl::OkStatus();
  }

  absl::Status Vector(const std::string& hf_name, const std::string& gguf_name, int64_t n,
                      std::vector<float>* out, bool optional = false) {
    const StTensor* t = st_.Find(hf_name);
    if (t == nullptr) return optional ? absl::OkStatus() : Missing(hf_name);
    used_.insert(t->name);
    if (t->numel() != n) return Shape(*t, absl::StrCat("[", n, "]"));
    absl::StatusOr<GgmlType> type = FloatType(*t);
    if (!type.ok()) return type.status();
    absl::StatusOr<std::vector<float>> v = StToFloats(*t);
    if (!v.ok()) return v.status();
    *out = std::move(*v);
    Count(gguf_name, *type, n, t->nbytes);
    return absl::OkStatus();
  }

  // Every tensor the engine has a name for must have been bound: anything else (an o_proj
  // bias, say) changes the model's function and is refused rather than ignored.
  absl::Status CheckAllUsed() const {
    for (const StTensor* t : st_.tensors()) {
      if (used_.count(t->name) || !HfToGgufTensorName(t->name).ok()) continue;
      return absl::UnimplementedError(
          absl::StrCat(st_.folder(), ": tensor '", t->name,
                       "' is not used by this engine's forward pass for this architecture "
                       "(biases other than qwen2's q/k/v are not supported); the model would "
                       "run wrongly"));
    }
    return absl::OkStatus();
  }

  bool any_packed() const { return any_packed_; }

 private:
  absl::Status Packed(const std::string& hf, const std::string& gguf, int64_t rows, int64_t cols,
                      WeightMatrix* out) {
    if (!quant_) {
      return absl::InvalidArgumentError(absl::StrCat(
          st_.folder(), ": tensor '", hf,
          ".qweight' is a packed 4-bit layer but no quantization_config (config.json), "
          "quantize_config.json or quant_config.json says how it was quantized"));
    }
    for (const char* s : {".qweight", ".qzeros", ".scales", ".g_idx"}) used_.insert(hf + s);
    absl::StatusOr<PackedLinear> layer = FindPackedLinear(st_, *quant_, hf);
    if (!layer.ok()) return layer.status();
    if (layer->out_features != rows || layer->in_features != cols) {
      return absl::InvalidArgumentError(absl::StrCat(st_.folder(), ": packed layer '", hf, "' is ",
                                                     layer->out_features, " x ", layer->in_features,
                                                     " (out x in), expected ", rows, " x ", cols,
                                                     " from config.json's hyper-parameters"));
    }
    absl::StatusOr<Q4_1Weights> q = RepackToQ4_1(*layer);
    if (!q.ok()) {
      return absl::Status(q.status().code(), absl::StrCat(st_.folder(), ": cannot repack '", hf,
                                                          "' to Q4_1: ", q.status().message()));
    }
    std::vector<uint8_t>& buf = owned_.emplace_back(q->blocks.size() * sizeof(BlockQ4_1));
    std::memcpy(buf.data(), q->blocks.data(), buf.size());
    *out = MatrixView(gguf + ".weight", GgmlType::kQ4_1, rows, cols, buf.data());
    out->input_perm = std::move(q->perm);
    Count(out->name, GgmlType::kQ4_1, rows * cols, buf.size());
    any_packed_ = true;
    return absl::OkStatus();
  }

  absl::StatusOr<GgmlType> FloatType(const StTensor& t) const {
    switch (t.dtype) {
      case StDtype::kF32:
        return GgmlType::kF32;
      case StDtype::kF16:
        return GgmlType::kF16;
      case StDtype::kBF16:
        return GgmlType::kBF16;
      default:
        return absl::UnimplementedError(
            absl::StrCat(st_.folder(), ": tensor '", t.name, "' is ", Sv(StDtypeName(t.dtype)),
                         "; weights must be F32, F16 or BF16 (or GPTQ/AWQ 4-bit packed layers)"));
    }
  }

  void Count(const std::string& name, GgmlType type, int64_t n, uint64_t bytes) {
    w_.bytes_by_type[type] += bytes;
    stored_.push_back(StoredTensor{name, type, n, bytes});
  }

  absl::Status Missing(const std::string& name) const {
    return absl::NotFoundError(absl::StrCat(st_.folder(), " has no tensor '", name,
                                            "'; is it a complete Llama-family checkpoint?"));
  }
  absl::Status Shape(const StTensor& t, const std::string& want) const {
    std::string dims;
    for (int64_t d : t.shape) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat(st_.folder(), ": tensor '", t.name,
                                                   "' has shape [", dims, "], expected ", want,
                                                   " from config.json's hyper-parameters"));
  }

  const SafetensorsModel& st_;
  const std::optional<QuantConfig>& quant_;
  ModelWeights& w_;
  std::vector<std::vector<uint8_t>>& owned_;
  std::vector<StoredTensor>& stored_;
  std::set<std::string> used_;
  bool any_packed_ = false;
};

// Gemma checkpoints store RMSNorm weights as w for (1 + w); the engine holds 1 + w.
void AddOne(std::vector<float>* v) {
  for (float& x : *v) x += 1.0f;
}

// Q, K, V (phi3: one qkv_proj, bound as row views) and gate/up (phi3: one gate_up_proj).
absl::Status BindProjections(HfBinder& b, const ModelConfig& c, const std::string& a,
                             const std::string& m, const std::string& g, LayerWeights* l) {
  absl::Status s;
  if (c.arch == "phi3") {
    WeightMatrix qkv, gate_up;
    const int64_t q = c.q_dim(), kv = c.kv_dim();
    s = b.Matrix(a + "qkv_proj", g + "attn_qkv", q + 2 * kv, c.dim, &qkv);
    if (s.ok()) s = b.Matrix(m + "gate_up_proj", g + "ffn_up", 2 * c.n_ff, c.dim, &gate_up);
    if (!s.ok()) return s;
    l->wq = RowView(qkv, 0, q, qkv.name + "[q]");
    l->wk = RowView(qkv, q, kv, qkv.name + "[k]");
    l->wv = RowView(qkv, q + kv, kv, qkv.name + "[v]");
    l->w_gate = RowView(gate_up, 0, c.n_ff, gate_up.name + "[gate]");
    l->w_up = RowView(gate_up, c.n_ff, c.n_ff, gate_up.name + "[up]");
    return absl::OkStatus();
  }
  s = b.Matrix(a + "q_proj", g + "attn_q", c.q_dim(), c.dim, &l->wq);
  if (s.ok()) s = b.Matrix(a + "k_proj", g + "attn_k", c.kv_dim(), c.dim, &l->wk);
  if (s.ok()) s = b.Matrix(a + "v_proj", g + "attn_v", c.kv_dim(), c.dim, &l->wv);
  if (s.ok()) s = b.Matrix(m + "gate_proj", g + "ffn_gate", c.n_ff, c.dim, &l->w_gate);
  if (s.ok()) s = b.Matrix(m + "up_proj", g + "ffn_up", c.n_ff, c.dim, &l->w_up);
  return s;
}

// The norms: llama's two, or gemma's four (post_attention_layernorm is the attention's
// post-norm there, pre_feedforward_layernorm the FFN's input norm), and Q/K norms.
absl::Status BindNorms(HfBinder& b, const ModelConfig& c, const std::string& h,
                       const std::string& g, LayerWeights* l) {
  const std::string a = h + "self_attn.";
  absl::Status s =
      b.Vector(h + "input_layernorm.weight", g + "attn_norm.weight", c.dim, &l->attn_norm);
  if (s.ok() && c.post_norms) {
    s = b.Vector(h + "post_attention_layernorm.weight", g + "post_attention_norm.weight", c.dim,
                 &l->attn_post_norm);
    if (s.ok()) {
      s = b.Vector(h + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", c.dim,
                   &l->ffn_norm);
    }
    if (s.ok()) {
      s = b.Vector(h + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", c.dim,
                   &l->ffn_post_norm);
    }
  } else if (s.ok()) {
    s = b.Vector(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", c.dim, &l->ffn_norm);
  }
  if (s.ok() && c.qk_norm) {
    s = b.Vector(a + "q_norm.weight", g + "attn_q_norm.weight", c.head_dim, &l->q_norm);
    if (s.ok()) s = b.Vector(a + "k_norm.weight", g + "attn_k_norm.weight", c.head_dim, &l->k_norm);
  }
  if (s.ok() && HfNormsStoreOffset(c)) {
    for (std::vector<float>* v : {&l->attn_norm, &l->ffn_norm, &l->attn_post_norm,
                                  &l->ffn_post_norm, &l->q_norm, &l->k_norm}) {
      AddOne(v);
    }
  }
  return s;
}

absl::Status BindLayer(HfBinder& b, const ModelConfig& c, int i, LayerWeights* l) {
  const std::string h = absl::StrCat("model.layers.", i, "."), g = absl::StrCat("blk.", i, ".");
  const std::string a = h + "self_attn.", m = h + "mlp.";
  absl::Status s = BindNorms(b, c, h, g, l);
  if (s.ok()) s = BindProjections(b, c, a, m, g, l);
  if (s.ok()) s = b.Matrix(a + "o_proj", g + "attn_output", c.dim, c.q_dim(), &l->wo);
  if (s.ok()) s = b.Matrix(m + "down_proj", g + "ffn_down", c.dim, c.n_ff, &l->w_down);
  if (s.ok() && c.qkv_bias) {
    s = b.Vector(a + "q_proj.bias", g + "attn_q.bias", c.q_dim(), &l->bq);
    if (s.ok()) s = b.Vector(a + "k_proj.bias", g + "attn_k.bias", c.kv_dim(), &l->bk);
    if (s.ok()) s = b.Vector(a + "v_proj.bias", g + "attn_v.bias", c.kv_dim(), &l->bv);
  }
  return s;
}

absl::Status BindAll(HfBinder& b, const ModelConfig& c, ModelWeights& w) {
  absl::Status s = b.Matrix("model.embed_tokens", "token_embd", c.n_vocab, c.dim, &w.tok_embd);
  if (s.ok()) s = b.Vector("model.norm.weight", "output_norm.weight", c.dim, &w.output_norm);
  if (!s.ok()) return s;
  if (HfNormsStoreOffset(c)) AddOne(&w.output_norm);
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int i = 0; i < c.n_layers && s.ok(); ++i) {
    s = BindLayer(b, c, i, &w.layers[static_cast<size_t>(i)]);
  }
  if (!s.ok()) return s;
  if (c.tied_embeddings) {
    w.output = w.tok_embd;
  } else {
    s = b.Matrix("lm_head", "output", c.n_vocab, c.dim, &w.output);
    if (!s.ok()) return s;
  }
  return b.CheckAllUsed();
}

// eos_token_id of generation_config.json / config.json (an int or a list), as extra
// end-of-generation ids: only ids the tokenizer marks as control tokens, and never BOS (some
// configs disagree with their tokenizer: tiny-random-llama's config says eos 1, which is <s>).
void AddConfigEosIds(const std::string& folder, TokenizerSpec& spec) {
  for (const char* file : {"generation_config.json", "config.json"}) {
    const std::string path = (fs::path(folder) / file).string();
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
    if (!j.ok() || !j->is_object() || !j->contains("eos_token_id")) continue;
    const nlohmann::json& e = (*j)["eos_token_id"];
    std::vector<int64_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
    if (e.is_array()) {
      for (const auto& x : e) {
        if (x.is_number_integer()) ids.push_back(x.get<int64_t>());
      }
    }
    for (int64_t id : ids) {
      if (id < 0 || id >= static_cast<int64_t>(spec.tokens.size()) || id == spec.bos_id ||
          id == spec.eos_id) {
        continue;
      }
      if (!spec.types.empty() && spec.types[id] != TokenType::kControl) continue;
      AddEndOfGenerationId(&spec, static_cast<int32_t>(id));
    }
  }
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& folder, int n_vocab) {
  const std::string tj = (fs::path(folder) / "tokenizer.json").string();
  std::error_code ec;
  if (!fs::exists(tj, ec)) {
    return absl::NotFoundError(
        absl::StrCat(folder,
                     " has no tokenizer.json; pagedinfer reads the fast-tokenizer file (a "
                     "tokenizer.model alone is not supported: save the tokenizer with transformers "
                     "to write tokenizer.json)"));
  }
  absl::StatusOr<std::string> text = ReadText(tj, kTokenizerJsonLimits.max_bytes);
  if (!text.ok()) return text.status();
  std::string cfg;
  const std::string tc = (fs::path(folder) / "tokenizer_config.json").string();
  if (fs::exists(tc, ec)) {
    absl::StatusOr<std::string> t = ReadText(tc, kConfigJsonLimits.max_bytes);
    if (!t.ok()) return t.status();
    cfg = std::move(*t);
  }
  absl::StatusOr<TokenizerSpec> spec = TokenizerSpecFromHfFiles(*text, cfg);
  if (!spec.ok()) {
    return absl::Status(spec.status().code(), absl::StrCat(folder, ": ", spec.status().message()));
  }
  AddConfigEosIds(folder, *spec);
  const int n_tok = static_cast<int>(spec->tokens.size());
  if (n_tok > n_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(folder, ": tokenizer.json has ", n_tok, " tokens but config.json's ",
                     "vocab_size (the embedding's rows) is ", n_vocab));
  }
  // Checkpoints often pad the embedding past the tokenizer (to a multiple of 64 or 128): the
  // padding rows become unused tokens, as llama.cpp's converter names them.
  if (spec->types.empty()) spec->types.assign(spec->tokens.size(), TokenType::kNormal);
  for (int id = n_tok; id < n_vocab; ++id) {
    spec->tokens.push_back(absl::StrCat("[PAD", id, "]"));
    spec->types.push_back(TokenType::kUnused);
    if (!spec->scores.empty()) spec->scores.push_back(-1e9f);
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Create(std::move(*spec));
  if (!tok.ok()) {
    return absl::Status(tok.status().code(), absl::StrCat(folder, ": ", tok.status().message()));
  }
  return tok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::FromHfFolder(const std::string& folder) {
  absl::StatusOr<HfConfig> hf = LoadHfConfig(folder);
  if (!hf.ok()) return hf.status();
  if (absl::Status s = hf->model.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(folder, "/config.json: ", s.message()));
  }
  std::unique_ptr<Model> m(new Model());
  m->path_ = folder;
  m->config_ = hf->model;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = LoadHfTokenizer(folder, m->config_.n_vocab);
  if (!tok.ok()) return tok.status();
  m->tokenizer_ = std::move(*tok);
  absl::StatusOr<std::unique_ptr<SafetensorsModel>> st = SafetensorsModel::Open(folder);
  if (!st.ok()) return st.status();
  m->safetensors_ = std::move(*st);
  HfBinder binder(*m->safetensors_, hf->quant, m->weights_, m->owned_, m->stored_);
  if (absl::Status s = BindAll(binder, m->config_, m->weights_); !s.ok()) return s;
  m->source_format_ = "safetensors";
  if (binder.any_packed()) {
    absl::StrAppend(&m->source_format_, " (", Sv(QuantMethodName(hf->quant->method)),
                    " 4-bit, group ", hf->quant->group_size,
                    hf->quant->desc_act ? ", act-order" : "", "; repacked to Q4_1)");
  }
  return m;
}

}  // namespace pinfer
