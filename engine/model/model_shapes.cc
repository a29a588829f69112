// Named shapes with their published hyper-parameters, file types, and the per-tensor storage
// types llama.cpp's quantizer picks for them.
#include "engine/model/model_shapes.h"

#include <cctype>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/architecture.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

struct ShapeEntry {
  std::string_view name;
  std::string_view arch;
  int n_vocab, dim, n_ff, n_layers, n_heads, n_kv_heads, head_dim, context_length;
  float rms_eps, rope_theta;
  bool tied;
  // Sliding window: tokens (0: none), layer period (SetSlidingWindow's), RoPE base of window
  // layers (0: rope_theta); linear RoPE factor of the full layers (0: none); rotated dims (0:
  // the whole head); soft-caps (0: the architecture's default).
  int window = 0, window_period = 0;
  float swa_theta = 0, rope_linear = 0;
  int n_rot = 0;
  float attn_softcap = 0, final_softcap = 0;
};

// Published configurations (Hugging Face config.json of each model).
// mistral-7b is v0.1 with its sliding window ignored (as llama.cpp's converter writes it: no
// window key); mistral-7b-v0.1 states the 4096-token window on every layer.
// llama3-8b, qwen2-7b and qwen3-8b ship byte-level BPE vocabularies; only their sizes matter.
// gemma3-4b/12b: the text model of Gemma3ForConditionalGeneration (five window layers of 1024
// per full layer; full layers RoPE base 1e6 with linear factor 8, window layers 10000).
// phi3-mini is Phi-3-mini-4k-instruct (window 2047 on every layer).
// The tiny-* shapes are a few MB each with each architecture's structure and windows of 32
// tokens, for tests against llama.cpp (engine/synth); row lengths are multiples of 256 so the
// K-quants apply.
// clang-format off
constexpr ShapeEntry kShapes[] = {
    // name, arch, vocab, dim, ff, layers, heads, kv heads, head dim, context, eps, theta, tied,
    // then (optional) window, window period, window-layer theta, linear RoPE factor, n_rot,
    // attention and final soft-caps.
    {"llama2-7b", "llama", 32000, 4096, 11008, 32, 32, 32, 128, 4096, 1e-5f, 10000.0f, false},
    {"llama2-13b", "llama", 32000, 5120, 13824, 40, 40, 40, 128, 4096, 1e-5f, 10000.0f, false},
    {"mistral-7b", "llama", 32000, 4096, 14336, 32, 32, 8, 128, 32768, 1e-5f, 10000.0f, false},
    {"mistral-7b-v0.1", "llama", 32000, 4096, 14336, 32, 32, 8, 128, 32768, 1e-5f, 10000.0f, false,
     4096},
    {"llama3-8b", "llama", 128256, 4096, 14336, 32, 32, 8, 128, 8192, 1e-5f, 500000.0f, false},
    {"qwen2-7b", "qwen2", 152064, 3584, 18944, 28, 28, 4, 128, 32768, 1e-6f, 1000000.0f, false},
    {"qwen3-8b", "qwen3", 151936, 4096, 12288, 36, 32, 8, 128, 40960, 1e-6f, 1000000.0f, false},
    {"gemma3-4b", "gemma3", 262208, 2560, 10240, 34, 8, 4, 256, 131072, 1e-6f, 1000000.0f, true,
     1024, 6, 10000.0f, 8.0f},
    {"gemma3-12b", "gemma3", 262208, 3840, 15360, 48, 16, 8, 256, 131072, 1e-6f, 1000000.0f, true,
     1024, 6, 10000.0f, 8.0f},
    {"phi3-mini", "phi3", 32064, 3072, 8192, 32, 32, 32, 96, 4096, 1e-5f, 10000.0f, false, 2047},
    {"tinyllama-1b", "llama", 32000, 2048, 5632, 22, 32, 4, 64, 2048, 1e-5f, 10000.0f, false},
    // A few-MB model for tests and the demo: every row length (256, 768) is a multiple of 256
    // so the K-quants apply; head_dim 32, grouped-query attention (8 query heads, 4 KV heads).
    {"tiny", "llama", 512, 256, 768, 4, 8, 4, 32, 1024, 1e-5f, 10000.0f, false},
    {"tiny-qwen3", "qwen3", 512, 256, 768, 4, 8, 4, 32, 1024, 1e-6f, 1000000.0f, false},
    // Soft-caps near the random model's score and logit sizes, so that capping changes them.
    {"tiny-gemma2", "gemma2", 512, 256, 768, 4, 4, 2, 64, 1024, 1e-6f, 10000.0f, true,
     32, 2, 0, 0, 0, 0.25f, 0.2f},
    {"tiny-gemma3", "gemma3", 512, 256, 768, 6, 4, 2, 64, 1024, 1e-6f, 1000000.0f, true,
     32, 6, 10000.0f, 8.0f},
    {"tiny-phi3", "phi3", 512, 256, 768, 4, 8, 4, 32, 1024, 1e-5f, 10000.0f, false,
     32, 0, 0, 0, 16},
    {"tiny-mistral-swa", "llama", 512, 256, 768, 4, 8, 2, 32, 1024, 1e-5f, 10000.0f, false, 32},
};
// clang-format on

struct FileTypeEntry {
  std::string_view name;
  GgmlType base;
  bool k_mix;
};

constexpr FileTypeEntry kFileTypes[] = {
    {"F32", GgmlType::kF32, false},    {"F16", GgmlType::kF16, false},
    {"BF16", GgmlType::kBF16, false},  {"Q8_0", GgmlType::kQ8_0, false},
    {"Q4_0", GgmlType::kQ4_0, false},  {"Q4_1", GgmlType::kQ4_1, false},
    {"Q5_0", GgmlType::kQ5_0, false},  {"Q5_1", GgmlType::kQ5_1, false},
    {"Q6_K", GgmlType::kQ6_K, false},  {"Q4_K_M", GgmlType::kQ4_K, true},
    {"Q5_K_M", GgmlType::kQ5_K, true},
};

bool IsQuantized(GgmlType t) { return GgmlTypeInfoOf(t).block_size > 1; }

// llama.cpp's "use more bits" layers: the first and last eighth, and every third between.
bool UseMoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// The type a tensor falls back to when `t`'s block does not divide its rows, as llama.cpp's
// quantizer does: K-quants step to a 32-wide legacy type of similar size (Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0); 32-wide types step to F16, which fits every row.
GgmlType FallbackOf(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_K:
      return GgmlType::kQ5_0;
    case GgmlType::kQ5_K:
      return GgmlType::kQ5_1;
    case GgmlType::kQ6_K:
      return GgmlType::kQ8_0;
    default:
      return GgmlType::kF16;
  }
}

// Applies fallbacks until the type's block divides the row; notes what happened.
GgmlType FitRow(GgmlType wanted, int64_t row, std::string* note) {
  GgmlType t = wanted;
  while (row % GgmlTypeInfoOf(t).block_size != 0) t = FallbackOf(t);
  if (t != wanted) {
    const GgmlTypeInfo& w = GgmlTypeInfoOf(wanted);
    *note = absl::StrCat(Sv(w.name), " needs rows of a multiple of ", w.block_size,
                         " values; this row has ", row, ", so it is stored as ",
                         Sv(GgmlTypeInfoOf(t).name));
  }
  return t;
}

// Storage type of the output projection (or of token_embd when it doubles as the output):
// llama.cpp stores it as Q6_K in every quantized file type except Q8_0 (kept), and as Q8_0
// when its rows are not a multiple of 256.
GgmlType OutputType(const FileType& ft, int64_t row, std::string* note) {
  if (!IsQuantized(ft.base) || ft.base == GgmlType::kQ8_0) return FitRow(ft.base, row, note);
  if (row % 256 != 0) {
    GgmlType t = FitRow(GgmlType::kQ8_0, row, note);
    if (note->empty()) {
      *note = absl::StrCat("Q6_K needs rows of a multiple of 256 values; this row has ", row,
                           ", so it is stored as Q8_0");
    }
    return t;
  }
  return GgmlType::kQ6_K;
}

}  // namespace

absl::StatusOr<ModelConfig> NamedShape(std::string_view name) {
  for (const ShapeEntry& s : kShapes) {
    if (s.name != name) continue;
    ModelConfig c;
    if (absl::Status st = SetArchitecture(s.arch, &c); !st.ok()) return st;
    c.name = std::string(s.name);
    c.n_vocab = s.n_vocab;
    c.dim = s.dim;
    c.n_ff = s.n_ff;
    c.n_layers = s.n_layers;
    c.n_heads = s.n_heads;
    c.n_kv_heads = s.n_kv_heads;
    c.head_dim = s.head_dim;
    c.context_length = s.context_length;
    c.rms_eps = s.rms_eps;
    c.rope_theta = s.rope_theta;
    c.tied_embeddings = c.tied_embeddings || s.tied;
    c.n_rot = s.n_rot;
    if (s.rope_linear > 0) c.rope_freq_scale = 1.0f / s.rope_linear;
    if (s.attn_softcap > 0) c.attn_softcap = s.attn_softcap;
    if (s.final_softcap > 0) c.final_softcap = s.final_softcap;
    if (c.arch == "gemma2" || c.arch == "gemma3") c.query_scale = GemmaQueryScale(c);
    if (c.arch == "phi3") c.query_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    // gemma3's window layers run without RoPE scaling, as llama.cpp's loader sets them.
    c.SetSlidingWindow(s.window, s.window_period, s.swa_theta > 0 ? s.swa_theta : s.rope_theta,
                       c.arch == "gemma3" ? 1.0f : c.rope_freq_scale);
    return c;
  }
  std::string names;
  for (const ShapeEntry& s : kShapes)
    absl::StrAppend(&names, names.empty() ? "" : ", ", Sv(s.name));
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model shape '", Sv(name), "'; choose one of: ", names));
}

std::vector<std::string> NamedShapeNames() {
  std::vector<std::string> names;
  for (const ShapeEntry& s : kShapes) names.emplace_back(s.name);
  return names;
}

absl::StatusOr<FileType> ParseFileType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string names;
  for (const FileTypeEntry& e : kFileTypes) {
    if (e.name == upper) return FileType{std::string(e.name), e.base, e.k_mix};
    absl::StrAppend(&names, names.empty() ? "" : ", ", Sv(e.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown file type '", Sv(name), "'; choose one of: ", names));
}

std::vector<TensorPlan> PlanTensors(const ModelConfig& c, const FileType& ft) {
  std::vector<TensorPlan> plan;
  auto add_f32 = [&](std::string name, int64_t n) {
    plan.push_back(TensorPlan{std::move(name), {n}, GgmlType::kF32, ""});
  };
  auto add_matrix = [&](std::string name, int64_t row, int64_t rows, GgmlType wanted) {
    TensorPlan t{std::move(name), {row, rows}, wanted, ""};
    t.type = FitRow(wanted, row, &t.fallback_note);
    plan.push_back(std::move(t));
  };
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ff = c.n_ff;

  // token_embd takes the base type, or the output's type when it doubles as the output.
  if (c.tied_embeddings) {
    TensorPlan t{"token_embd.weight", {dim, c.n_vocab}, ft.base, ""};
    t.type = OutputType(ft, dim, &t.fallback_note);
    plan.push_back(std::move(t));
  } else {
    add_matrix("token_embd.weight", dim, c.n_vocab, ft.base);
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    const GgmlType more = ft.k_mix && UseMoreBits(l, c.n_layers) ? GgmlType::kQ6_K : ft.base;
    add_f32(p + "attn_norm.weight", dim);
    if (c.arch == "phi3") {  // fused, as llama.cpp's converter writes phi3
      add_matrix(p + "attn_qkv.weight", dim, q_dim + 2 * kv_dim, more);
    } else {
      add_matrix(p + "attn_q.weight", dim, q_dim, ft.base);
      if (c.qkv_bias) add_f32(p + "attn_q.bias", q_dim);
      add_matrix(p + "attn_k.weight", dim, kv_dim, ft.base);
      if (c.qkv_bias) add_f32(p + "attn_k.bias", kv_dim);
      add_matrix(p + "attn_v.weight", dim, kv_dim, more);
      if (c.qkv_bias) add_f32(p + "attn_v.bias", kv_dim);
    }
    if (c.qk_norm) {
      add_f32(p + "attn_q_norm.weight", c.head_dim);
      add_f32(p + "attn_k_norm.weight", c.head_dim);
    }
    add_matrix(p + "attn_output.weight", q_dim, dim, ft.base);
    if (c.post_norms) add_f32(p + "post_attention_norm.weight", dim);
    add_f32(p + "ffn_norm.weight", dim);
    if (c.arch == "phi3") {  // gate and up in one tensor, gate first
      add_matrix(p + "ffn_up.weight", dim, 2 * ff, ft.base);
    } else {
      add_matrix(p + "ffn_gate.weight", dim, ff, ft.base);
      add_matrix(p + "ffn_up.weight", dim, ff, ft.base);
    }
    add_matrix(p + "ffn_down.weight", ff, dim, more);
    if (c.post_norms) add_f32(p + "post_ffw_norm.weight", dim);
  }
  add_f32("output_norm.weight", dim);
  if (!c.rope_freq_factors.empty()) add_f32("rope_freqs.weight", c.rope_dims() / 2);
  if (!c.tied_embeddings) {
    TensorPlan t{"output.weight", {dim, c.n_vocab}, ft.base, ""};
    t.type = OutputType(ft, dim, &t.fallback_note);
    plan.push_back(std::move(t));
  }
  return plan;
}

uint64_t TensorBytes(const std::vector<TensorPlan>& plan) {
  uint64_t total = 0;
  for (const TensorPlan& t : plan) {
    int64_t rows = 1;
    for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
    total += static_cast<uint64_t>(GgmlRowBytes(t.type, t.dims[0])) * static_cast<uint64_t>(rows);
  }
  return total;
}

uint32_t LlamaFileTypeId(const FileType& ft) {
  if (ft.k_mix) return ft.base == GgmlType::kQ5_K ? 17 : 15;
  switch (ft.base) {
    case GgmlType::kF32:
      return 0;
    case GgmlType::kF16:
      return 1;
    case GgmlType::kQ4_0:
      return 2;
    case GgmlType::kQ4_1:
      return 3;
    case GgmlType::kQ8_0:
      return 7;
    case GgmlType::kQ5_0:
      return 8;
    case GgmlType::kQ5_1:
      return 9;
    case GgmlType::kQ6_K:
      return 18;
    case GgmlType::kBF16:
      return 32;
    default:
      return 1;
  }
}

}  // namespace pinfer
