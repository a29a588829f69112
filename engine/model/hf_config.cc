#include "engine/model/hf_config.h"

#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/model/hf_architecture.h"
#include "loaders/absl_compat.h"
#include "loaders/json_strict.h"

namespace pinfer {
namespace {

using nlohmann::json;

absl::Status GetInt(const json& j, std::string_view source, const char* key, int* out,
                    bool required) {
  if (!j.contains(key) || j[key].is_null()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": missing \"", key, "\"; is this a decoder config.json?"));
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < 0 ||
      j[key].get<int64_t>() > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": \"", key, "\" is ", j[key].dump(), ", not a valid size"));
  }
  *out = j[key].get<int>();
  return absl::OkStatus();
}

absl::Status GetFloat(const json& j, std::string_view source, const char* key, float* out) {
  if (!j.contains(key) || j[key].is_null()) return absl::OkStatus();
  if (!j[key].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": \"", key, "\" is ", j[key].dump(), ", not a number"));
  }
  *out = j[key].get<float>();
  return absl::OkStatus();
}

// rope_scaling: "llama3" (Llama 3.1+) becomes per-pair factors, "linear" a frequency scale;
// other kinds (dynamic, yarn, longrope, ...) are refused rather than run wrongly.
absl::Status ParseRopeScaling(const json& r, std::string_view source, ModelConfig* m) {
  const std::string where = absl::StrCat(Sv(source), ": rope_scaling ", r.dump());
  if (!r.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (r.contains(key) && r[key].is_string()) type = r[key].get<std::string>();
  }
  double factor = 0, low = 1, high = 4, original = 8192;
  auto number = [&](const char* key, double* out, bool required) -> absl::Status {
    if (!r.contains(key) || r[key].is_null()) {
      return required ? absl::InvalidArgumentError(absl::StrCat(where, " has no \"", key, "\""))
                      : absl::OkStatus();
    }
    if (!r[key].is_number() || !(r[key].get<double>() > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": \"", key, "\" must be a positive number"));
    }
    *out = r[key].get<double>();
    return absl::OkStatus();
  };
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    if (absl::Status s = number("factor", &factor, true); !s.ok()) return s;
    m->rope_freq_scale = static_cast<float>(1.0 / factor);
    return absl::OkStatus();
  }
  if (type == "llama3") {
    for (auto [key, out] : {std::pair{"factor", &factor}, std::pair{"low_freq_factor", &low},
                            std::pair{"high_freq_factor", &high},
                            std::pair{"original_max_position_embeddings", &original}}) {
      if (absl::Status s = number(key, out, true); !s.ok()) return s;
    }
    if (!(high > low)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": high_freq_factor must exceed low_freq_factor"));
    }
    m->rope_freq_factors =
        Llama3RopeFactors(m->rope_theta, m->head_dim, factor, low, high, original);
    return absl::OkStatus();
  }
  return absl::UnimplementedError(
      absl::StrCat(where, ": RoPE scaling '", type,
                   "' is not supported; supported: linear and llama3 (Llama 3.1 and later)"));
}

}  // namespace

absl::StatusOr<HfConfig> ParseHfConfig(std::string_view json_text, std::string_view source) {
  absl::StatusOr<json> doc = ParseJson(json_text, source, kConfigJsonLimits);
  if (!doc.ok()) return doc.status();
  return HfConfigFromJson(*doc, source);
}

absl::StatusOr<HfConfig> HfConfigFromJson(const nlohmann::json& j, std::string_view source) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": not a JSON object"));
  }
  HfConfig c;
  if (!j.contains("architectures") || !j["architectures"].is_array() ||
      j["architectures"].empty() || !j["architectures"][0].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": no \"architectures\" list naming the model class"));
  }
  c.architecture = j["architectures"][0].get<std::string>();
  ModelConfig& m = c.model;
  if (absl::Status s = SetHfArchitecture(c.architecture, source, &m); !s.ok()) return s;
  m.rope_style = RopeStyle::kHalves;  // Hugging Face checkpoints rotate halves
  m.rms_eps = 1e-6f;
  m.head_dim = 0;
  m.n_kv_heads = 0;
  struct IntKey {
    const char* key;
    int* out;
    bool required;
  };
  for (const IntKey& k :
       {IntKey{"hidden_size", &m.dim, true}, IntKey{"intermediate_size", &m.n_ff, true},
        IntKey{"num_hidden_layers", &m.n_layers, true},
        IntKey{"num_attention_heads", &m.n_heads, true}, IntKey{"vocab_size", &m.n_vocab, true},
        IntKey{"num_key_value_heads", &m.n_kv_heads, false}, IntKey{"head_dim", &m.head_dim, false},
        IntKey{"max_position_embeddings", &m.context_length, false}}) {
    if (absl::Status s = GetInt(j, source, k.key, k.out, k.required); !s.ok()) return s;
  }
  if (m.n_heads == 0) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": num_attention_heads is 0"));
  }
  if (m.n_kv_heads == 0) m.n_kv_heads = m.n_heads;
  if (m.head_dim == 0) m.head_dim = m.dim / m.n_heads;
  if (absl::Status s = GetFloat(j, source, "rope_theta", &m.rope_theta); !s.ok()) return s;
  if (absl::Status s = GetFloat(j, source, "rms_norm_eps", &m.rms_eps); !s.ok()) return s;
  if (j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean()) {
    m.tied_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    if (absl::Status s = ParseRopeScaling(j["rope_scaling"], source, &m); !s.ok()) return s;
  }
  if (absl::Status s = ReadHfArchitectureKeys(j, source, &m); !s.ok()) return s;
  if (j.contains("quantization_config") && !j["quantization_config"].is_null()) {
    absl::StatusOr<QuantConfig> q = ParseQuantConfigJson(
        j["quantization_config"].dump(), absl::StrCat(Sv(source), " quantization_config"));
    if (!q.ok()) return q.status();
    c.quant = *q;
  }
  return c;
}

absl::StatusOr<HfConfig> LoadHfConfig(const std::string& folder) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(folder) / "config.json").string();
  // Parsed once, with the size and nesting limits (a config.json nested 100,000 deep used to
  // overflow the stack in a dump() here).
  absl::StatusOr<json> j = ReadJsonFile(path, kConfigJsonLimits);
  if (!j.ok()) return j.status();
  absl::StatusOr<HfConfig> c = HfConfigFromJson(*j, path);
  if (!c.ok()) return c.status();
  c->model.name = fs::path(folder).lexically_normal().filename().string();
  if (c->model.name.empty()) c->model.name = fs::path(folder).parent_path().filename().string();
  if (!c->quant) {
    absl::StatusOr<std::optional<QuantConfig>> q = LoadQuantConfig(folder);
    if (!q.ok()) return q.status();
    c->quant = *q;
  }
  return c;
}

absl::StatusOr<std::string> HfToGgufTensorName(std::string_view hf_name) {
  static const std::map<std::string_view, std::string_view> kTop = {
      {"model.embed_tokens", "token_embd"},
      {"model.norm", "output_norm"},
      {"lm_head", "output"},
  };
  static const std::map<std::string_view, std::string_view> kLayer = {
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"input_layernorm", "attn_norm"},
      {"post_attention_layernorm", "ffn_norm"},  // gemma: post_attention_norm
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"self_attn.qkv_proj", "attn_qkv"},
      {"mlp.gate_up_proj", "ffn_up"},  // phi3: gate and up in one
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  static constexpr std::string_view kSuffixes[] = {".weight", ".bias",   ".qweight",
                                                   ".qzeros", ".scales", ".g_idx"};
  auto not_found = [&] {
    return absl::NotFoundError(
        absl::StrCat("tensor '", Sv(hf_name), "' has no engine name (not used by the engine)"));
  };
  std::string_view suffix;
  for (std::string_view s : kSuffixes) {
    if (hf_name.size() > s.size() && hf_name.substr(hf_name.size() - s.size()) == s) suffix = s;
  }
  if (suffix.empty()) return not_found();
  const std::string_view stem = hf_name.substr(0, hf_name.size() - suffix.size());
  if (auto it = kTop.find(stem); it != kTop.end()) return absl::StrCat(Sv(it->second), Sv(suffix));
  constexpr std::string_view kLayers = "model.layers.";
  if (stem.substr(0, kLayers.size()) != kLayers) return not_found();
  const std::string_view rest = stem.substr(kLayers.size());
  const size_t dot = rest.find('.');
  int layer = 0;
  if (dot == std::string_view::npos || dot == 0 ||
      rest.substr(0, dot).find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(Sv(rest.substr(0, dot)), &layer)) {
    return not_found();
  }
  auto it = kLayer.find(rest.substr(dot + 1));
  if (it == kLayer.end()) return not_found();
  return absl::StrCat("blk.", layer, ".", Sv(it->second), Sv(suffix));
}

}  // namespace pinfer
