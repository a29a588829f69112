#include "engine/convert/gguf_export.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "loaders/absl_compat.h"
#include "loaders/fp16.h"
#include "loaders/quants.h"

namespace pinfer {
namespace {

// A tensor's source in the model: a matrix (with a row map for the Q/K permutation), the rows
// of several matrices one after another (phi3's fused attn_qkv and ffn_up), or a float vector.
struct Source {
  const WeightMatrix* matrix = nullptr;
  const std::vector<float>* vector = nullptr;
  int heads = 0;  // > 0: permute rows from halves to adjacent pairs, per head of head_dim
  std::vector<const WeightMatrix*> fused;  // when set: these matrices' rows, in order
};

Source Mat(const WeightMatrix* m, int heads = 0) { return Source{m, nullptr, heads, {}}; }
Source Vec(const std::vector<float>* v) { return Source{nullptr, v, 0, {}}; }
Source Fused(std::vector<const WeightMatrix*> parts) {
  return Source{nullptr, nullptr, 0, std::move(parts)};
}

absl::StatusOr<Source> FindSource(const Model& model, const std::string& name) {
  const ModelWeights& w = model.weights();
  const ModelConfig& c = model.config();
  const bool permute = c.arch == "llama" && c.rope_style == RopeStyle::kHalves;
  if (name == "token_embd.weight") return Mat(&w.tok_embd);
  if (name == "output.weight") return Mat(&w.output);
  if (name == "output_norm.weight") return Vec(&w.output_norm);
  if (name == "rope_freqs.weight") return Vec(&c.rope_freq_factors);
  std::vector<std::string> parts = absl::StrSplit(name, '.');
  int layer = -1;
  if (parts.size() == 4 && parts[0] == "blk") layer = std::atoi(parts[1].c_str());
  if (layer < 0 || layer >= c.n_layers) {
    return absl::InternalError(absl::StrCat("no source for tensor '", name, "'"));
  }
  const LayerWeights& l = w.layers[static_cast<size_t>(layer)];
  const std::string key = parts[2] + "." + parts[3];
  const std::map<std::string, Source> table = {
      {"attn_norm.weight", Vec(&l.attn_norm)},
      {"attn_qkv.weight", Fused({&l.wq, &l.wk, &l.wv})},
      {"attn_q_norm.weight", Vec(&l.q_norm)},
      {"attn_k_norm.weight", Vec(&l.k_norm)},
      {"post_attention_norm.weight", Vec(&l.attn_post_norm)},
      {"post_ffw_norm.weight", Vec(&l.ffn_post_norm)},
      {"attn_q.weight", Mat(&l.wq, permute ? c.n_heads : 0)},
      {"attn_k.weight", Mat(&l.wk, permute ? c.n_kv_heads : 0)},
      {"attn_v.weight", Mat(&l.wv)},
      {"attn_output.weight", Mat(&l.wo)},
      {"attn_q.bias", Vec(&l.bq)},
      {"attn_k.bias", Vec(&l.bk)},
      {"attn_v.bias", Vec(&l.bv)},
      {"ffn_norm.weight", Vec(&l.ffn_norm)},
      {"ffn_gate.weight", Mat(&l.w_gate)},
      {"ffn_up.weight", c.arch == "phi3" ? Fused({&l.w_gate, &l.w_up}) : Mat(&l.w_up)},
      {"ffn_down.weight", Mat(&l.w_down)},
  };
  auto it = table.find(key);
  if (it == table.end()) return absl::InternalError(absl::StrCat("no source for '", name, "'"));
  return it->second;
}

void FillTensor(const Source& src, const TensorPlan& t, int head_dim, uint8_t* dst, size_t nbytes) {
  const int64_t n = t.dims[0];
  if (src.vector != nullptr) {
    std::memcpy(dst, src.vector->data(), std::min(nbytes, src.vector->size() * sizeof(float)));
    return;
  }
  const std::vector<const WeightMatrix*> parts =
      src.fused.empty() ? std::vector<const WeightMatrix*>{src.matrix} : src.fused;
  int64_t rows = 0;
  for (const WeightMatrix* m : parts) rows += m->rows;
  const size_t row_bytes = GgmlRowBytes(t.type, n);
  std::vector<float> buf(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows && static_cast<size_t>(r + 1) * row_bytes <= nbytes; ++r) {
    int64_t from = r;
    size_t part = 0;
    while (from >= parts[part]->rows) from -= parts[part++]->rows;
    if (src.heads > 0) {  // GGUF row h*hd + 2i + j  <-  HF row h*hd + j*hd/2 + i
      const int64_t h = r / head_dim, within = r % head_dim;
      from = h * head_dim + (within % 2) * (head_dim / 2) + within / 2;
    }
    WeightRowForGguf(*parts[part], from, buf.data());
    uint8_t* out = dst + static_cast<size_t>(r) * row_bytes;
    if (t.type == GgmlType::kF32) {
      std::memcpy(out, buf.data(), row_bytes);
    } else if (t.type == GgmlType::kF16 || t.type == GgmlType::kBF16) {
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = t.type == GgmlType::kF16 ? Fp32ToFp16(buf[i]) : Fp32ToBf16(buf[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
    } else {
      QuantizeRow(t.type, buf.data(), out, n);
    }
  }
}

void AddTokenizer(const TokenizerSpec& spec, GgufWriter* w) {
  const bool spm = spec.kind == TokenizerSpec::Kind::kSentencePiece;
  w->SetString("tokenizer.ggml.model", spm ? "llama" : "gpt2");
  w->SetStringArray("tokenizer.ggml.tokens", spec.tokens);
  if (spm) {
    w->SetF32Array("tokenizer.ggml.scores", SentencePieceScores(spec));
  } else {
    w->SetStringArray("tokenizer.ggml.merges", spec.merges);
    w->SetString("tokenizer.ggml.pre", spec.pre);
  }
  std::vector<int32_t> types;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    types.push_back(
        static_cast<int32_t>(i < spec.types.size() ? spec.types[i] : TokenType::kNormal));
  }
  w->SetI32Array("tokenizer.ggml.token_type", types);
  for (auto [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", spec.bos_id},
                         std::pair{"tokenizer.ggml.eos_token_id", spec.eos_id},
                         std::pair{"tokenizer.ggml.unknown_token_id", spec.unk_id},
                         std::pair{"tokenizer.ggml.padding_token_id", spec.pad_id}}) {
    if (id >= 0) w->SetU32(key, static_cast<uint32_t>(id));
  }
  // llama.cpp has one eot id; further end-of-generation ids have no GGUF key.
  if (!spec.eog_ids.empty()) {
    w->SetU32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(spec.eog_ids.front()));
  }
  w->SetBool("tokenizer.ggml.add_bos_token", spec.add_bos);
  w->SetBool("tokenizer.ggml.add_eos_token", spec.add_eos);
  if (spm) w->SetBool("tokenizer.ggml.add_space_prefix", spec.add_space_prefix);
  if (!spec.chat_template.empty()) w->SetString("tokenizer.chat_template", spec.chat_template);
}

}  // namespace

void WeightRowForGguf(const WeightMatrix& w, int64_t r, float* dst) {
  if (w.input_perm.empty()) {
    DequantizeRow(w.type, w.row(r), dst, w.cols);
    return;
  }
  std::vector<float> stored(static_cast<size_t>(w.cols));
  DequantizeRow(w.type, w.row(r), stored.data(), w.cols);
  for (int64_t k = 0; k < w.cols; ++k) dst[w.input_perm[k]] = stored[k];
}

std::vector<float> SentencePieceScores(const TokenizerSpec& spec) {
  if (!spec.scores.empty()) return spec.scores;
  const size_t n = spec.tokens.size();
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < n; ++i) ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  std::vector<float> scores(n, 0.0f);
  std::vector<bool> set(n, false);
  for (size_t k = 0; k < spec.merges.size(); ++k) {
    const std::string& m = spec.merges[k];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos) continue;
    auto it = ids.find(m.substr(0, sp) + m.substr(sp + 1));
    if (it == ids.end() || set[it->second]) continue;
    scores[it->second] = -static_cast<float>(k + 1);
    set[it->second] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!set[i]) scores[i] = -static_cast<float>(spec.merges.size() + 1 + i);
  }
  return scores;
}

absl::Status AddModelToGguf(const Model& model, const FileType& ft, GgufWriter* w,
                            const TensorProgress& progress) {
  const ModelConfig& c = model.config();
  const std::string& a = c.arch;
  w->SetString("general.architecture", a);
  w->SetString("general.name", c.name.empty() ? "model" : c.name);
  w->SetString("general.description",
               absl::StrCat("converted by pagedinfer convert from ", model.path()));
  w->SetU32("general.file_type", LlamaFileTypeId(ft));
  SetHyperParameters(c, w);
  AddTokenizer(model.tokenizer().spec(), w);
  const std::vector<TensorPlan> plan = PlanTensors(c, ft);
  for (const TensorPlan& t : plan) {
    absl::StatusOr<Source> src = FindSource(model, t.name);
    if (!src.ok()) return src.status();
    TensorProgressInfo info{static_cast<int>(&t - plan.data()) + 1,
                            static_cast<int>(plan.size()),
                            t.name,
                            t.dims,
                            model.source_format(),
                            t.type,
                            0};
    GgufWriter::Fill fill = [s = *src, t, hd = c.head_dim, info, progress](uint8_t* dst,
                                                                           size_t nbytes) mutable {
      FillTensor(s, t, hd, dst, nbytes);
      info.out_bytes = nbytes;
      if (progress) progress(info);
    };
    if (absl::Status s = w->AddTensor(t.name, t.type, t.dims, std::move(fill)); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteModelAsGguf(const Model& model, const FileType& ft, const std::string& path,
                              const TensorProgress& progress) {
  GgufWriter w;
  if (absl::Status s = AddModelToGguf(model, ft, &w, progress); !s.ok()) return s;
  return w.WriteFile(path);
}

}  // namespace pinfer
