#include "engine/model/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/model/architecture.h"
#include "loaders/gguf.h"

namespace pinfer {

absl::Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name, "' (", arch, "): ", what));
  };
  if (n_vocab <= 0 || dim <= 0 || n_ff <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 ||
      head_dim <= 0) {
    return bad(absl::StrCat("sizes must be positive (vocab ", n_vocab, ", dim ", dim, ", ff ", n_ff,
                            ", layers ", n_layers, ", heads ", n_heads, ", kv heads ", n_kv_heads,
                            ", head dim ", head_dim, ")"));
  }
  if (n_heads % n_kv_heads != 0) {
    return bad(absl::StrCat(n_heads, " query heads are not a multiple of ", n_kv_heads,
                            " key/value heads"));
  }
  if (head_dim % 2 != 0)
    return bad(absl::StrCat("head dim ", head_dim, " is odd; RoPE needs pairs"));
  if (n_rot < 0 || n_rot > head_dim || n_rot % 2 != 0) {
    return bad(absl::StrCat("RoPE dimensions ", n_rot,
                            " must be an even number up to the head dim ", head_dim));
  }
  for (float cap : {attn_softcap, final_softcap, query_scale}) {
    if (!(cap >= 0) || !std::isfinite(cap)) {
      return bad(
          absl::StrCat("soft-capping and query scale ", cap, " must be 0 (off) or positive"));
    }
  }
  if (!(rms_eps > 0) || !std::isfinite(rms_eps) || rms_eps >= 1) {
    return bad(absl::StrCat("RMS norm epsilon ", rms_eps,
                            " must be a small positive number (models use 1e-6 to 1e-5)"));
  }
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) {
    return bad(absl::StrCat("RoPE base (theta) ", rope_theta, " must be positive and finite"));
  }
  if (!(rope_freq_scale > 0) || !std::isfinite(rope_freq_scale)) {
    return bad(absl::StrCat("RoPE frequency scale ", rope_freq_scale, " must be positive"));
  }
  if (!rope_freq_factors.empty()) {
    if (rope_freq_factors.size() != static_cast<size_t>(rope_dims() / 2)) {
      return bad(absl::StrCat(rope_freq_factors.size(), " RoPE frequency factors for ", rope_dims(),
                              " rotated dimensions; expected ", rope_dims() / 2));
    }
    for (float f : rope_freq_factors) {
      if (!(f > 0) || !std::isfinite(f)) {
        return bad(absl::StrCat("RoPE frequency factor ", f, " must be positive and finite"));
      }
    }
  }
  if (!layers.empty()) {
    if (layers.size() != static_cast<size_t>(n_layers)) {
      return bad(
          absl::StrCat(layers.size(), " per-layer attention entries for ", n_layers, " layers"));
    }
    for (size_t l = 0; l < layers.size(); ++l) {
      const LayerAttention& a = layers[l];
      if (a.window < 0)
        return bad(absl::StrCat("layer ", l, ": sliding window ", a.window, " < 0"));
      if (!(a.rope_theta > 0) || !std::isfinite(a.rope_theta) || !(a.rope_freq_scale > 0) ||
          !std::isfinite(a.rope_freq_scale)) {
        return bad(absl::StrCat("layer ", l, ": RoPE base ", a.rope_theta, " and scale ",
                                a.rope_freq_scale, " must be positive and finite"));
      }
    }
  }
  return absl::OkStatus();
}

LayerAttention ModelConfig::layer(int l) const {
  if (!layers.empty()) return layers[static_cast<size_t>(l)];
  return LayerAttention{0, rope_theta, rope_freq_scale};
}

int ModelConfig::max_window() const {
  int w = 0;
  for (const LayerAttention& a : layers) w = std::max(w, a.window);
  return w;
}

int ModelConfig::n_window_layers() const {
  int n = 0;
  for (const LayerAttention& a : layers) n += a.window > 0;
  return n;
}

void ModelConfig::SetSlidingWindow(int window, int period, float swa_theta, float swa_scale) {
  layers.clear();
  if (window <= 0 || period < 0) return;
  layers.resize(static_cast<size_t>(std::max(n_layers, 0)));
  for (int l = 0; l < n_layers; ++l) {
    const bool swa = period == 0 || l % period < period - 1;
    layers[static_cast<size_t>(l)] = swa ? LayerAttention{window, swa_theta, swa_scale}
                                         : LayerAttention{0, rope_theta, rope_freq_scale};
  }
}

KvCacheConfig KvCacheConfigFor(const ModelConfig& c, KvDtype dtype) {
  KvCacheConfig kc;
  kc.n_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.dtype = dtype;
  if (c.has_sliding_window()) {
    for (int l = 0; l < c.n_layers; ++l) kc.layer_windows.push_back(c.layer(l).window);
  }
  return kc;
}

void SetHyperParameters(const ModelConfig& c, GgufWriter* w) {
  const std::string& a = c.arch;
  w->SetU32(a + ".vocab_size", static_cast<uint32_t>(c.n_vocab));
  w->SetU32(a + ".context_length", static_cast<uint32_t>(c.context_length));
  w->SetU32(a + ".embedding_length", static_cast<uint32_t>(c.dim));
  w->SetU32(a + ".block_count", static_cast<uint32_t>(c.n_layers));
  w->SetU32(a + ".feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w->SetU32(a + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  w->SetU32(a + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w->SetU32(a + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w->SetU32(a + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w->SetF32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  w->SetF32(a + ".rope.freq_base", c.rope_theta);
  w->SetU32(a + ".rope.dimension_count", static_cast<uint32_t>(c.rope_dims()));
  if (c.rope_freq_scale != 1.0f) {  // per-pair factors travel as the rope_freqs.weight tensor
    w->SetString(a + ".rope.scaling.type", "linear");
    w->SetF32(a + ".rope.scaling.factor", 1.0f / c.rope_freq_scale);
  }
  WriteArchitectureKeys(c, w);
}

std::vector<float> Llama3RopeFactors(float theta, int head_dim, double factor,
                                     double low_freq_factor, double high_freq_factor,
                                     double original_max_position_embeddings) {
  const double low_freq_wavelen = original_max_position_embeddings / low_freq_factor;
  const double high_freq_wavelen = original_max_position_embeddings / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim / 2; ++i) {
    // The frequency in float32, as the reference computes it before the wavelength test.
    const float freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original_max_position_embeddings / wavelen - low_freq_factor) /
                            (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

namespace {

// {arch}.rope.scaling.* keys and the rope_freqs.weight tensor into c.
absl::Status ReadRopeScaling(const GgufFile& f, const std::string& p, ModelConfig* c) {
  std::string type = f.GetString(p + "rope.scaling.type").value_or("");
  double factor = 0;
  if (auto v = f.GetFloat(p + "rope.scaling.factor"); v.ok()) {
    factor = *v;
  } else if (auto old = f.GetFloat(p + "rope.scale_linear"); old.ok()) {
    factor = *old;
  }
  if (!type.empty() && type != "none" && type != "linear") {
    return absl::UnimplementedError(absl::StrCat(
        "GGUF key ", p, "rope.scaling.type = '", type,
        "': only linear RoPE scaling and Llama-3.1-style frequency factors are supported"));
  }
  if (type != "none" && factor != 0) {
    if (!(factor > 0) || !std::isfinite(factor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key ", p, "rope.scaling.factor = ", factor, " must be positive"));
    }
    c->rope_freq_scale = static_cast<float>(1.0 / factor);
  }
  const GgufTensorInfo* t = f.FindTensor("rope_freqs.weight");
  if (t == nullptr) return absl::OkStatus();
  const int64_t n = c->rope_dims() / 2;
  if (t->type != GgmlType::kF32 || t->dims.size() != 1 || t->dims[0] != n ||
      t->nbytes != static_cast<uint64_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor 'rope_freqs.weight' must be F32 with ",
                                                   n, " values (rotated dimensions / 2)"));
  }
  c->rope_freq_factors.resize(static_cast<size_t>(n));
  std::memcpy(c->rope_freq_factors.data(), f.data(*t), t->nbytes);
  return absl::OkStatus();
}

// The header's sizes against what the file holds: block_count against the blk.N tensors
// (every layer 0..block_count-1 present, none beyond), and the RoPE and value head sizes
// against head_dim (the engine rotates whole heads and keeps K and V the same width).
absl::Status CheckAgainstTensors(const GgufFile& f, const std::string& p, const ModelConfig& c) {
  std::set<int64_t> layers;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    const size_t dot = t.name.find('.', 4);
    int64_t n = 0;
    if (dot != std::string::npos && absl::SimpleAtoi(t.name.substr(4, dot - 4), &n) && n >= 0) {
      layers.insert(n);
    }
  }
  if (!layers.empty() &&
      (static_cast<int64_t>(layers.size()) != c.n_layers || *layers.rbegin() != c.n_layers - 1)) {
    std::string missing;
    for (int64_t i = 0, shown = 0; i <= *layers.rbegin() && shown < 8; ++i) {
      if (!layers.count(i)) absl::StrAppend(&missing, shown++ ? ", " : "", i);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF key ", p, "block_count = ", c.n_layers, ", but the file's tensors describe layers ",
        *layers.begin(), " to ", *layers.rbegin(),
        missing.empty() ? "" : absl::StrCat(" (none for layer ", missing, ")"),
        "; the header and the tensors disagree (a damaged or hand-edited file)"));
  }
  for (const char* key : {"rope.dimension_count", "attention.value_length"}) {
    auto v = f.GetInt(p + key);
    if (!v.ok()) {
      if (absl::IsNotFound(v.status())) continue;
      return v.status();
    }
    // Partial rotary is read into n_rot (llama.cpp refuses it for llama files, as here).
    if (std::string_view(key) == "rope.dimension_count" && c.arch != "llama" && *v > 0 &&
        *v <= c.head_dim && *v % 2 == 0) {
      continue;
    }
    if (*v != c.head_dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF key ", p, key, " = ", *v, " does not match the head dim ", c.head_dim,
                       std::string_view(key) == "rope.dimension_count"
                           ? (*v < c.head_dim ? " (RoPE over part of each head is not supported)"
                                              : " (RoPE cannot cover more than a head)")
                           : " (value heads must be as wide as key heads)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.GetString("general.architecture");
  if (!arch.ok()) return arch.status();
  if (absl::Status s = SetArchitecture(*arch, &c); !s.ok()) return s;
  c.name = f.GetString("general.name").value_or("");
  const std::string p = c.arch + ".";
  auto get_int = [&](const std::string& key, int* out, bool required) -> absl::Status {
    auto v = f.GetInt(p + key);
    if (v.ok()) {
      if (*v <= 0 || *v > (1 << 30)) {
        return absl::InvalidArgumentError(
            absl::StrCat("GGUF key ", p, key, " = ", *v, " is out of range"));
      }
      *out = static_cast<int>(*v);
      return absl::OkStatus();
    }
    if (!required && absl::IsNotFound(v.status())) return absl::OkStatus();
    return v.status();
  };
  for (auto [key, out] :
       {std::pair{"embedding_length", &c.dim}, std::pair{"feed_forward_length", &c.n_ff},
        std::pair{"block_count", &c.n_layers}, std::pair{"attention.head_count", &c.n_heads},
        std::pair{"context_length", &c.context_length}}) {
    if (absl::Status s = get_int(key, out, true); !s.ok()) return s;
  }
  c.n_kv_heads = c.n_heads;
  if (absl::Status s = get_int("attention.head_count_kv", &c.n_kv_heads, false); !s.ok()) return s;
  c.head_dim = c.dim / c.n_heads;
  if (absl::Status s = get_int("attention.key_length", &c.head_dim, false); !s.ok()) return s;
  if (auto eps = f.GetFloat(p + "attention.layer_norm_rms_epsilon"); eps.ok()) {
    c.rms_eps = static_cast<float>(*eps);
  }
  if (auto theta = f.GetFloat(p + "rope.freq_base"); theta.ok()) {
    c.rope_theta = static_cast<float>(*theta);
  }
  if (auto n_rot = f.GetInt(p + "rope.dimension_count");
      n_rot.ok() && *n_rot > 0 && *n_rot < c.head_dim && c.arch != "llama") {
    c.n_rot = static_cast<int>(*n_rot);
  }
  if (absl::Status s = ReadRopeScaling(f, p, &c); !s.ok()) return s;
  if (const GgufTensorInfo* emb = f.FindTensor("token_embd.weight"); emb && emb->dims.size() == 2) {
    c.n_vocab = static_cast<int>(emb->dims[1]);
  } else if (auto v = f.GetInt(p + "vocab_size"); v.ok()) {
    c.n_vocab = static_cast<int>(*v);
  }
  c.tied_embeddings = c.tied_embeddings || f.FindTensor("output.weight") == nullptr;
  if (absl::Status s = ReadArchitectureKeys(f, &c); !s.ok()) return s;
  if (absl::Status s = c.Validate(); !s.ok()) return s;
  if (absl::Status s = CheckAgainstTensors(f, p, c); !s.ok()) return s;
  return c;
}

}  // namespace pinfer
