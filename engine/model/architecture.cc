#include "engine/model/architecture.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"
#include "loaders/gguf.h"

namespace pinfer {
namespace {

constexpr std::string_view kArchitectures[] = {"llama",  "qwen2",  "qwen3",
                                               "gemma2", "gemma3", "phi3"};

bool IsGemma(std::string_view arch) { return arch == "gemma2" || arch == "gemma3"; }

// A float key that must be positive (or zero when zero_ok), or `fallback` when absent.
absl::StatusOr<float> PositiveFloat(const GgufFile& f, const std::string& key, float fallback,
                                    bool zero_ok = false) {
  auto v = f.GetFloat(key);
  if (!v.ok()) return absl::IsNotFound(v.status()) ? absl::StatusOr<float>(fallback) : v.status();
  if (!(*v > 0 || (zero_ok && *v == 0)) || !std::isfinite(*v)) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " = ", *v, " must be ",
                                                   zero_ok ? "0 (off) or " : "",
                                                   "positive and finite"));
  }
  return static_cast<float>(*v);
}

// attention.sliding_window_pattern: a period (u32) or one bool per layer (true: window).
// Returns the period, or -2 after filling *per_layer.
absl::StatusOr<int> WindowPattern(const GgufFile& f, const std::string& key, int n_layers,
                                  int fallback, std::vector<bool>* per_layer) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return fallback;
  if (v->type == GgufType::kArray) {
    if (v->arr.size() != static_cast<size_t>(n_layers)) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " has ", v->arr.size(),
                                                     " entries for ", n_layers, " layers"));
    }
    for (const GgufValue& e : v->arr) per_layer->push_back(e.u != 0 || e.i != 0);
    return -2;
  }
  auto period = f.GetInt(key);
  if (!period.ok()) return period.status();
  if (*period < 0 || *period > n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF key ", key, " = ", *period,
                                                   " is not a layer period (0 to ", n_layers, ")"));
  }
  return static_cast<int>(*period);
}

absl::Status ReadSlidingWindow(const GgufFile& f, const std::string& p, ModelConfig* c) {
  const std::string key = p + "attention.sliding_window";
  int window = c->arch == "gemma2" ? 4096 : 0;  // llama.cpp's default for gemma2 files
  if (auto w = f.GetInt(key); w.ok()) {
    if (*w < 0 || *w > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key ", key, " = ", *w, " is not a window length in tokens"));
    }
    window = static_cast<int>(*w);
  } else if (!absl::IsNotFound(w.status())) {
    return w.status();
  }
  if (window == 0 || c->arch == "qwen2" || c->arch == "qwen3") return absl::OkStatus();
  std::vector<bool> per_layer;
  absl::StatusOr<int> period = WindowPattern(f, p + "attention.sliding_window_pattern", c->n_layers,
                                             DefaultWindowPeriod(c->arch), &per_layer);
  if (!period.ok()) return period.status();
  absl::StatusOr<float> swa_theta =
      PositiveFloat(f, p + "rope.freq_base_swa", c->arch == "gemma3" ? 10000.0f : c->rope_theta);
  if (!swa_theta.ok()) return swa_theta.status();
  // gemma3's window layers run without RoPE scaling (llama.cpp's rope_freq_scale_train_swa).
  const float swa_scale = c->arch == "gemma3" ? 1.0f : c->rope_freq_scale;
  c->SetSlidingWindow(window, *period >= 0 ? *period : 0, *swa_theta, swa_scale);
  for (size_t l = 0; l < per_layer.size(); ++l) {
    if (!per_layer[l]) c->layers[l] = LayerAttention{0, c->rope_theta, c->rope_freq_scale};
  }
  return absl::OkStatus();
}

}  // namespace

std::string SupportedArchitectures() {
  return "llama (Llama 2/3, Mistral, TinyLlama), qwen2, qwen3, gemma2, gemma3, phi3";
}

int DefaultWindowPeriod(std::string_view arch) {
  if (arch == "gemma2") return 2;
  if (arch == "gemma3") return 6;
  return 0;
}

absl::Status SetArchitecture(std::string_view arch, ModelConfig* c) {
  bool known = false;
  for (std::string_view a : kArchitectures) known |= a == arch;
  if (!known) {
    return absl::UnimplementedError(absl::StrCat("model architecture '", Sv(arch),
                                                 "' is not supported; this engine runs ",
                                                 SupportedArchitectures()));
  }
  c->arch = std::string(arch);
  c->rope_style = arch == "llama" ? RopeStyle::kAdjacentPairs : RopeStyle::kHalves;
  c->qkv_bias = arch == "qwen2";
  c->qk_norm = arch == "qwen3" || arch == "gemma3";
  c->post_norms = IsGemma(arch);
  c->scale_embeddings = IsGemma(arch);
  c->ffn_act = IsGemma(arch) ? FfnActivation::kGeluTanh : FfnActivation::kSilu;
  c->attn_softcap = arch == "gemma2" ? 50.0f : 0.0f;  // llama.cpp's defaults
  c->final_softcap = arch == "gemma2" ? 30.0f : 0.0f;
  if (arch == "gemma2") c->tied_embeddings = true;  // llama.cpp never reads output.weight
  return absl::OkStatus();
}

float GemmaQueryScale(const ModelConfig& c) {
  const bool is_27b =
      (c.arch == "gemma2" && c.n_layers == 46) || (c.arch == "gemma3" && c.n_layers == 62);
  const float d = is_27b ? static_cast<float>(c.dim / c.n_heads) : static_cast<float>(c.head_dim);
  return 1.0f / std::sqrt(d);
}

absl::Status ReadArchitectureKeys(const GgufFile& f, ModelConfig* c) {
  const std::string p = c->arch + ".";
  if (c->arch == "gemma2") {
    absl::StatusOr<float> attn = PositiveFloat(f, p + "attn_logit_softcapping", 50.0f);
    if (!attn.ok()) return attn.status();
    c->attn_softcap = *attn;
  }
  if (IsGemma(c->arch)) {
    absl::StatusOr<float> fin =
        PositiveFloat(f, p + "final_logit_softcapping", c->arch == "gemma2" ? 30.0f : 0.0f, true);
    if (!fin.ok()) return fin.status();
    c->final_softcap = *fin;
    c->query_scale = GemmaQueryScale(*c);
  }
  if (c->arch == "phi3") {
    c->query_scale = 1.0f / std::sqrt(static_cast<float>(c->head_dim));
    for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
      if (f.FindTensor(t) != nullptr) {
        return absl::UnimplementedError(absl::StrCat(
            "tensor '", t,
            "': LongRoPE (the 128k-context Phi-3, Phi-3.5 and Phi-4-mini models) is not "
            "supported yet; the 4k-context Phi-3 models run"));
      }
    }
  }
  return ReadSlidingWindow(f, p, c);
}

int SlidingWindowPeriod(const ModelConfig& c) {
  if (!c.has_sliding_window()) return -1;
  for (int period = 0; period <= c.n_layers; ++period) {
    bool same = true;
    for (int l = 0; l < c.n_layers && same; ++l) {
      const bool swa = period == 0 || l % period < period - 1;
      same = swa == (c.layers[static_cast<size_t>(l)].window > 0);
    }
    if (same) return period;
  }
  return -1;
}

std::string DescribeFeatures(const ModelConfig& c) {
  std::vector<std::string> f;
  if (c.qkv_bias) f.push_back("Q/K/V biases");
  if (c.qk_norm) f.push_back("Q/K norms");
  if (c.post_norms) f.push_back("post-norms");
  if (c.scale_embeddings) f.push_back("embeddings x sqrt(dim)");
  if (c.ffn_act == FfnActivation::kGeluTanh) f.push_back("GeGLU (tanh GELU)");
  if (c.attn_softcap > 0) f.push_back(absl::StrCat("attention soft-cap ", c.attn_softcap));
  if (c.final_softcap > 0) f.push_back(absl::StrCat("final soft-cap ", c.final_softcap));
  if (c.query_scale > 0) f.push_back(absl::StrCat("query scale ", c.query_scale));
  if (c.n_rot > 0) f.push_back(absl::StrCat("RoPE on ", c.n_rot, " of ", c.head_dim, " dims"));
  if (c.has_sliding_window()) {
    float theta = 0;
    for (const LayerAttention& a : c.layers) theta = a.window > 0 ? a.rope_theta : theta;
    f.push_back(absl::StrCat(
        "sliding window ", c.max_window(), " on ", c.n_window_layers(), " of ", c.n_layers,
        " layers", theta != c.rope_theta ? absl::StrCat(" (RoPE base ", theta, " there)") : ""));
  }
  std::string out;
  for (const std::string& s : f) absl::StrAppend(&out, out.empty() ? "" : "; ", s);
  return out;
}

void WriteArchitectureKeys(const ModelConfig& c, GgufWriter* w) {
  const std::string p = c.arch + ".";
  if (c.arch == "gemma2") w->SetF32(p + "attn_logit_softcapping", c.attn_softcap);
  if (IsGemma(c.arch)) w->SetF32(p + "final_logit_softcapping", c.final_softcap);
  if (!c.has_sliding_window()) return;
  w->SetU32(p + "attention.sliding_window", static_cast<uint32_t>(c.max_window()));
  const int period = SlidingWindowPeriod(c);
  if (period < 0) {
    std::vector<GgufValue> flags;
    for (const LayerAttention& a : c.layers) flags.push_back(GgufValue::Bool(a.window > 0));
    w->Set(p + "attention.sliding_window_pattern", GgufValue::Array(GgufType::kBool, flags));
  } else if (period != DefaultWindowPeriod(c.arch)) {
    w->SetU32(p + "attention.sliding_window_pattern", static_cast<uint32_t>(period));
  }
  for (const LayerAttention& a : c.layers) {
    if (a.window > 0) {
      w->SetF32(p + "rope.freq_base_swa", a.rope_theta);
      break;
    }
  }
}

}  // namespace pinfer
