#include "engine/model/hf_architecture.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/model/architecture.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

using nlohmann::json;

struct HfClass {
  std::string_view hf_class, arch, model_type;
};

constexpr HfClass kClasses[] = {
    {"LlamaForCausalLM", "llama", "llama"},    {"MistralForCausalLM", "llama", "mistral"},
    {"Qwen2ForCausalLM", "qwen2", "qwen2"},    {"Qwen3ForCausalLM", "qwen3", "qwen3"},
    {"Gemma2ForCausalLM", "gemma2", "gemma2"}, {"Gemma3ForCausalLM", "gemma3", "gemma3_text"},
    {"Phi3ForCausalLM", "phi3", "phi3"},
};

bool IsGemma(const ModelConfig& m) { return m.arch == "gemma2" || m.arch == "gemma3"; }

// An optional number: absent leaves *out, null sets null_value (when given).
absl::Status Number(const json& j, std::string_view source, const char* key, double* out,
                    const double* null_value = nullptr) {
  if (!j.contains(key)) return absl::OkStatus();
  if (j[key].is_null()) {
    if (null_value) *out = *null_value;
    return absl::OkStatus();
  }
  if (!j[key].is_number() || !(j[key].get<double>() >= 0) || !std::isfinite(j[key].get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": \"", key, "\" is ", j[key].dump(),
                                                   ", not a non-negative number"));
  }
  *out = j[key].get<double>();
  return absl::OkStatus();
}

// sliding_window_pattern / layer_types of gemma3 into per-layer windows.
absl::Status GemmaWindows(const json& j, std::string_view source, double window, ModelConfig* m) {
  double period = m->arch == "gemma2" ? 2 : 6, local_base = 10000;
  if (absl::Status s = Number(j, source, "sliding_window_pattern", &period); !s.ok()) return s;
  if (absl::Status s = Number(j, source, "rope_local_base_freq", &local_base); !s.ok()) return s;
  if (m->arch == "gemma2") local_base = m->rope_theta;
  m->SetSlidingWindow(static_cast<int>(window), static_cast<int>(period),
                      static_cast<float>(local_base),
                      m->arch == "gemma3" ? 1.0f : m->rope_freq_scale);
  if (!j.contains("layer_types") || !j["layer_types"].is_array() || window <= 0) {
    return absl::OkStatus();
  }
  const json& types = j["layer_types"];
  if (types.size() != static_cast<size_t>(m->n_layers)) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(source), ": \"layer_types\" has ",
                                                   types.size(), " entries for ", m->n_layers,
                                                   " layers"));
  }
  const LayerAttention local{static_cast<int>(window), static_cast<float>(local_base),
                             m->arch == "gemma3" ? 1.0f : m->rope_freq_scale};
  for (size_t l = 0; l < types.size(); ++l) {
    const bool sliding = types[l].is_string() && types[l].get<std::string>() == "sliding_attention";
    m->layers[l] = sliding ? local : LayerAttention{0, m->rope_theta, m->rope_freq_scale};
  }
  return absl::OkStatus();
}

absl::Status ReadGemmaKeys(const json& j, std::string_view source, ModelConfig* m) {
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    if (j.contains(key) && j[key].is_string() && j[key].get<std::string>() != "gelu_pytorch_tanh") {
      return absl::UnimplementedError(absl::StrCat(Sv(source), ": \"", key, "\" is ", j[key].dump(),
                                                   "; gemma runs with gelu_pytorch_tanh only"));
    }
  }
  const double zero = 0;
  double scalar = m->head_dim, attn_cap = m->attn_softcap, final_cap = m->final_softcap;
  double window = 4096;
  absl::Status s = Number(j, source, "query_pre_attn_scalar", &scalar);
  if (s.ok()) s = Number(j, source, "attn_logit_softcapping", &attn_cap, &zero);
  if (s.ok()) s = Number(j, source, "final_logit_softcapping", &final_cap, &zero);
  if (s.ok()) s = Number(j, source, "sliding_window", &window, &zero);
  if (!s.ok()) return s;
  if (m->arch == "gemma3" && attn_cap > 0) {
    return absl::UnimplementedError(
        absl::StrCat(Sv(source),
                     ": gemma3 with attn_logit_softcapping is not a model llama.cpp or this engine "
                     "runs (Gemma 3 has none)"));
  }
  if (!(scalar > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(source), ": query_pre_attn_scalar must be positive"));
  }
  m->query_scale = static_cast<float>(1.0 / std::sqrt(scalar));
  m->attn_softcap = static_cast<float>(attn_cap);
  m->final_softcap = static_cast<float>(final_cap);
  if (!j.contains("tie_word_embeddings")) m->tied_embeddings = true;  // Gemma's default
  return GemmaWindows(j, source, window, m);
}

absl::Status ReadPhi3Keys(const json& j, std::string_view source, ModelConfig* m) {
  m->query_scale = 1.0f / std::sqrt(static_cast<float>(m->head_dim));
  double factor = 1;
  if (absl::Status s = Number(j, source, "partial_rotary_factor", &factor); !s.ok()) return s;
  // llama.cpp's converter: rope dims = int(factor * hidden_size) // heads.
  const int n_rot = static_cast<int>(factor * m->dim) / m->n_heads;
  if (factor > 0 && n_rot < m->head_dim) m->n_rot = n_rot;
  return absl::OkStatus();
}

}  // namespace

absl::Status SetHfArchitecture(std::string_view hf_class, std::string_view source, ModelConfig* m) {
  std::string names;
  for (const HfClass& c : kClasses) {
    if (c.hf_class == hf_class) return SetArchitecture(c.arch, m);
    absl::StrAppend(&names, names.empty() ? "" : ", ", Sv(c.hf_class));
  }
  return absl::UnimplementedError(absl::StrCat(Sv(source), ": architecture '", Sv(hf_class),
                                               "' is not supported (", names, ")"));
}

absl::Status ReadHfArchitectureKeys(const json& j, std::string_view source, ModelConfig* m) {
  if (IsGemma(*m)) return ReadGemmaKeys(j, source, m);
  if (m->arch == "phi3") {
    if (absl::Status s = ReadPhi3Keys(j, source, m); !s.ok()) return s;
  }
  if (m->arch != "phi3" && m->arch != "llama") return absl::OkStatus();
  // Mistral's and Phi-3's window covers every layer.
  const double zero = 0;
  double window = 0;
  if (absl::Status s = Number(j, source, "sliding_window", &window, &zero); !s.ok()) return s;
  if (window > (1 << 30)) window = 0;  // "no window" written as a huge number
  m->SetSlidingWindow(static_cast<int>(window), 0, m->rope_theta, m->rope_freq_scale);
  return absl::OkStatus();
}

bool HfNormsStoreOffset(const ModelConfig& m) { return IsGemma(m); }

absl::Status WriteHfArchitectureKeys(const ModelConfig& m, json* cfg) {
  const bool window = m.has_sliding_window();
  const int period = SlidingWindowPeriod(m);
  std::string_view hf_class, model_type;
  for (const HfClass& c : kClasses) {
    if (c.arch != m.arch) continue;
    // A llama model with a window is Mistral's class (Llama's has no sliding_window).
    if (m.arch == "llama" && (c.hf_class == "MistralForCausalLM") != window) continue;
    hf_class = c.hf_class;
    model_type = c.model_type;
    break;
  }
  if (hf_class.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no Hugging Face model class for architecture ", m.arch));
  }
  const int want_period = DefaultWindowPeriod(m.arch);
  if (window && (m.arch == "gemma3" ? period < 0 : period != want_period)) {
    return absl::FailedPreconditionError(absl::StrCat("this ", m.arch,
                                                      " model's window layers follow no pattern ",
                                                      Sv(hf_class), "'s config.json can state"));
  }
  (*cfg)["architectures"] = {std::string(hf_class)};
  (*cfg)["model_type"] = std::string(model_type);
  if (window) (*cfg)["sliding_window"] = m.max_window();
  if (IsGemma(m)) {
    (*cfg)["hidden_activation"] = "gelu_pytorch_tanh";
    (*cfg)["hidden_act"] = "gelu_pytorch_tanh";
    (*cfg)["query_pre_attn_scalar"] = 1.0 / (static_cast<double>(m.query_scale) * m.query_scale);
    (*cfg)["attn_logit_softcapping"] = m.attn_softcap > 0 ? json(m.attn_softcap) : json(nullptr);
    (*cfg)["final_logit_softcapping"] = m.final_softcap > 0 ? json(m.final_softcap) : json(nullptr);
  }
  if (m.arch == "gemma3" && window) {
    (*cfg)["sliding_window_pattern"] = period;
    for (const LayerAttention& a : m.layers) {
      if (a.window > 0) (*cfg)["rope_local_base_freq"] = a.rope_theta;
    }
  }
  if (m.arch == "phi3" && m.n_rot > 0) {
    (*cfg)["partial_rotary_factor"] = static_cast<double>(m.n_rot) / m.head_dim;
  }
  return absl::OkStatus();
}

}  // namespace pinfer
