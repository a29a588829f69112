#include "engine/convert/hf_export.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/convert/gguf_export.h"
#include "engine/model/hf_architecture.h"
#include "loaders/absl_compat.h"
#include "loaders/fp16.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kSpaceMark[] = "\xE2\x96\x81";  // U+2581

// Merges for a SentencePiece vocabulary: every split of a piece into two pieces of the
// vocabulary, ordered by the merged piece's score (higher first), then by ids.
std::vector<std::string> MergesFromScores(const TokenizerSpec& spec) {
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    ids.emplace(spec.tokens[i], static_cast<int32_t>(i));
  }
  std::vector<std::tuple<float, int32_t, int32_t, std::string>> found;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (!spec.types.empty() && spec.types[id] != TokenType::kNormal) continue;
    const std::string& piece = spec.tokens[id];
    for (size_t cut = 1; cut < piece.size(); ++cut) {
      if ((static_cast<uint8_t>(piece[cut]) & 0xC0) == 0x80) continue;  // inside a character
      auto left = ids.find(piece.substr(0, cut));
      auto right = ids.find(piece.substr(cut));
      if (left == ids.end() || right == ids.end()) continue;
      found.emplace_back(-spec.scores[id], static_cast<int32_t>(id), left->second,
                         left->first + " " + right->first);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> merges;
  for (auto& f : found) merges.push_back(std::move(std::get<3>(f)));
  return merges;
}

std::string TokenText(const TokenizerSpec& spec, int32_t id) {
  return id >= 0 && id < static_cast<int32_t>(spec.tokens.size()) ? spec.tokens[id] : "";
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::vector<uint8_t> Encode(const float* v, int64_t n, StDtype dtype) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * StDtypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == StDtype::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = dtype == StDtype::kF16 ? Fp32ToFp16(v[i]) : Fp32ToBf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// heads > 0: HF row h*hd + j*hd/2 + i comes from GGUF row h*hd + 2i + j.
StTensorData MatrixTensor(const std::string& name, const WeightMatrix& w, int heads, int hd,
                          StDtype dtype) {
  std::vector<float> all(static_cast<size_t>(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    int64_t from = r;
    if (heads > 0) {
      const int64_t h = r / hd, within = r % hd, half = hd / 2;
      from = h * hd + 2 * (within % half) + within / half;
    }
    WeightRowForGguf(w, from, all.data() + r * w.cols);
  }
  return StTensorData{name, dtype, {w.rows, w.cols}, Encode(all.data(), w.rows * w.cols, dtype)};
}

StTensorData VectorTensor(const std::string& name, const std::vector<float>& v, StDtype dtype) {
  return StTensorData{
      name, dtype, {static_cast<int64_t>(v.size())}, Encode(v.data(), (int64_t)v.size(), dtype)};
}

StTensorData NormTensor(const std::string& name, std::vector<float> v, bool offset, StDtype dtype) {
  if (offset) {  // gemma: the checkpoint holds w for the (1 + w) the engine keeps
    for (float& x : v) x -= 1.0f;
  }
  return VectorTensor(name, v, dtype);
}

// The rows of several matrices one after another (phi3's qkv_proj and gate_up_proj).
StTensorData FusedTensor(const std::string& name, std::initializer_list<const WeightMatrix*> parts,
                         StDtype dtype) {
  int64_t rows = 0, cols = 0;
  for (const WeightMatrix* m : parts) rows += m->rows, cols = m->cols;
  std::vector<float> all(static_cast<size_t>(rows * cols));
  int64_t r = 0;
  for (const WeightMatrix* m : parts) {
    for (int64_t i = 0; i < m->rows; ++i, ++r) WeightRowForGguf(*m, i, all.data() + r * cols);
  }
  return StTensorData{name, dtype, {rows, cols}, Encode(all.data(), rows * cols, dtype)};
}

void LayerTensors(const ModelConfig& c, const LayerWeights& l, int i, StDtype dtype,
                  std::vector<StTensorData>* t) {
  const bool permute = c.arch == "llama" && c.rope_style == RopeStyle::kAdjacentPairs;
  const bool off = HfNormsStoreOffset(c);
  const int hd = c.head_dim;
  const std::string p = absl::StrCat("model.layers.", i, ".");
  t->push_back(NormTensor(p + "input_layernorm.weight", l.attn_norm, off, dtype));
  if (c.arch == "phi3") {
    t->push_back(FusedTensor(p + "self_attn.qkv_proj.weight", {&l.wq, &l.wk, &l.wv}, dtype));
  } else {
    t->push_back(
        MatrixTensor(p + "self_attn.q_proj.weight", l.wq, permute ? c.n_heads : 0, hd, dtype));
    t->push_back(
        MatrixTensor(p + "self_attn.k_proj.weight", l.wk, permute ? c.n_kv_heads : 0, hd, dtype));
    t->push_back(MatrixTensor(p + "self_attn.v_proj.weight", l.wv, 0, hd, dtype));
  }
  t->push_back(MatrixTensor(p + "self_attn.o_proj.weight", l.wo, 0, hd, dtype));
  if (c.qkv_bias) {
    t->push_back(VectorTensor(p + "self_attn.q_proj.bias", l.bq, dtype));
    t->push_back(VectorTensor(p + "self_attn.k_proj.bias", l.bk, dtype));
    t->push_back(VectorTensor(p + "self_attn.v_proj.bias", l.bv, dtype));
  }
  if (c.qk_norm) {
    t->push_back(NormTensor(p + "self_attn.q_norm.weight", l.q_norm, off, dtype));
    t->push_back(NormTensor(p + "self_attn.k_norm.weight", l.k_norm, off, dtype));
  }
  if (c.post_norms) {  // gemma's names
    t->push_back(NormTensor(p + "post_attention_layernorm.weight", l.attn_post_norm, off, dtype));
    t->push_back(NormTensor(p + "pre_feedforward_layernorm.weight", l.ffn_norm, off, dtype));
    t->push_back(NormTensor(p + "post_feedforward_layernorm.weight", l.ffn_post_norm, off, dtype));
  } else {
    t->push_back(NormTensor(p + "post_attention_layernorm.weight", l.ffn_norm, off, dtype));
  }
  if (c.arch == "phi3") {
    t->push_back(FusedTensor(p + "mlp.gate_up_proj.weight", {&l.w_gate, &l.w_up}, dtype));
  } else {
    t->push_back(MatrixTensor(p + "mlp.gate_proj.weight", l.w_gate, 0, hd, dtype));
    t->push_back(MatrixTensor(p + "mlp.up_proj.weight", l.w_up, 0, hd, dtype));
  }
  t->push_back(MatrixTensor(p + "mlp.down_proj.weight", l.w_down, 0, hd, dtype));
}

std::vector<StTensorData> HfTensors(const Model& model, StDtype dtype) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  std::vector<StTensorData> t;
  t.push_back(MatrixTensor("model.embed_tokens.weight", w.tok_embd, 0, c.head_dim, dtype));
  for (int i = 0; i < c.n_layers; ++i) {
    LayerTensors(c, w.layers[static_cast<size_t>(i)], i, dtype, &t);
  }
  t.push_back(NormTensor("model.norm.weight", w.output_norm, HfNormsStoreOffset(c), dtype));
  if (!c.tied_embeddings) {
    t.push_back(MatrixTensor("lm_head.weight", w.output, 0, c.head_dim, dtype));
  }
  return t;
}

}  // namespace

absl::StatusOr<std::string> HfTokenizerJson(const TokenizerSpec& spec) {
  json vocab = json::object();
  for (size_t i = 0; i < spec.tokens.size(); ++i) vocab[spec.tokens[i]] = i;
  json added = json::array();
  for (size_t i = 0; i < spec.types.size(); ++i) {
    const TokenType t = spec.types[i];
    if (t != TokenType::kControl && t != TokenType::kUserDefined && t != TokenType::kUnknown) {
      continue;
    }
    added.push_back({{"id", i},
                     {"content", spec.tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", t == TokenType::kUserDefined},
                     {"special", t != TokenType::kUserDefined}});
  }
  json j = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  json model = {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}};
  if (spec.kind == TokenizerSpec::Kind::kSentencePiece) {
    json norms = json::array();
    if (spec.add_space_prefix) norms.push_back({{"type", "Prepend"}, {"prepend", kSpaceMark}});
    norms.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpaceMark}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", norms}};
    j["pre_tokenizer"] = nullptr;
    model["unk_token"] = spec.unk_id >= 0 ? json(TokenText(spec, spec.unk_id)) : json(nullptr);
    model["fuse_unk"] = true;
    model["byte_fallback"] = true;
    model["merges"] = spec.merges.empty() ? MergesFromScores(spec) : spec.merges;
  } else if (spec.pre == "gpt2") {
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "ByteLevel"},
                          {"add_prefix_space", false},
                          {"trim_offsets", true},
                          {"use_regex", true}};
    model["unk_token"] = nullptr;
    model["byte_fallback"] = false;
    model["ignore_merges"] = spec.ignore_merges;
    model["merges"] = spec.merges;
  } else {
    return absl::UnimplementedError(
        absl::StrCat("writing tokenizer.json for the byte-level BPE pre-tokenizer '", Sv(spec.pre),
                     "' is not supported (only gpt2 and SentencePiece vocabularies)"));
  }
  j["model"] = model;
  if (spec.add_bos && spec.bos_id >= 0) {
    json single = json::array();
    single.push_back({{"SpecialToken", {{"id", TokenText(spec, spec.bos_id)}, {"type_id", 0}}}});
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", single}};
  } else {
    j["post_processor"] = nullptr;
  }
  return j.dump(1);
}

absl::Status WriteHfFolder(const Model& model, const std::string& folder, StDtype dtype) {
  if (dtype != StDtype::kF32 && dtype != StDtype::kF16 && dtype != StDtype::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write weights as ", Sv(StDtypeName(dtype)), "; use F32, F16 or BF16"));
  }
  const ModelConfig& c = model.config();
  if (!c.rope_freq_factors.empty()) {
    // config.json states llama3 scaling by its parameters, which per-pair factors do not
    // determine; writing none would silently change the model.
    return absl::UnimplementedError(
        "this model has per-pair RoPE frequency factors (rope_freqs.weight, Llama 3.1 style), "
        "which a config.json can only state as the rope_scaling parameters they came from; "
        "exporting it to a Hugging Face folder is not supported");
  }
  const TokenizerSpec& spec = model.tokenizer().spec();
  absl::StatusOr<std::string> tok_json = HfTokenizerJson(spec);
  if (!tok_json.ok()) return tok_json.status();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", folder, ": ", ec.message()));

  json cfg = {{"hidden_size", c.dim},
              {"intermediate_size", c.n_ff},
              {"num_hidden_layers", c.n_layers},
              {"num_attention_heads", c.n_heads},
              {"num_key_value_heads", c.n_kv_heads},
              {"head_dim", c.head_dim},
              {"vocab_size", c.n_vocab},
              {"max_position_embeddings", c.context_length},
              {"rms_norm_eps", c.rms_eps},
              {"rope_theta", c.rope_theta},
              {"hidden_act", "silu"},  // gemma: replaced by WriteHfArchitectureKeys
              {"tie_word_embeddings", c.tied_embeddings},
              {"torch_dtype", dtype == StDtype::kF32   ? "float32"
                              : dtype == StDtype::kF16 ? "float16"
                                                       : "bfloat16"}};
  if (c.rope_freq_scale != 1.0f) {
    cfg["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 1.0 / c.rope_freq_scale}};
  }
  if (absl::Status s = WriteHfArchitectureKeys(c, &cfg); !s.ok()) return s;
  if (spec.bos_id >= 0) cfg["bos_token_id"] = spec.bos_id;
  if (spec.eos_id >= 0) cfg["eos_token_id"] = spec.eos_id;
  json tok_cfg = {{"add_bos_token", spec.add_bos}, {"add_eos_token", spec.add_eos}};
  for (auto [key, id] :
       {std::pair{"bos_token", spec.bos_id}, std::pair{"eos_token", spec.eos_id},
        std::pair{"unk_token", spec.unk_id}, std::pair{"pad_token", spec.pad_id}}) {
    if (id >= 0) tok_cfg[key] = TokenText(spec, id);
  }
  if (!spec.chat_template.empty()) tok_cfg["chat_template"] = spec.chat_template;

  std::vector<StTensorData> t = HfTensors(model, dtype);
  const fs::path dir(folder);
  if (absl::Status s =
          WriteSafetensors((dir / "model.safetensors").string(), t, {{"format", "pt"}});
      !s.ok()) {
    return s;
  }
  for (auto [name, text] :
       {std::pair{"config.json", cfg.dump(2)}, std::pair{"tokenizer.json", *tok_json},
        std::pair{"tokenizer_config.json", tok_cfg.dump(2)}}) {
    if (absl::Status s = WriteText((dir / name).string(), text); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace pinfer
