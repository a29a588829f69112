// Named shapes with their published hyper-parameters, file types, and the per-tensor storage
// types llama.cpp's quantizer picks for them.
#include "engine/model/model_shapes.h"

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

struct ShapeEntry {
  std::string_view name;
  std::string_view arch;
  int n_vocab, dim, n_ff, n_layers, n_heads, n_kv_heads, context_length;
  float rms_eps, rope_theta;
  bool qkv_bias, tied;
};

// Published configurations (Hugging Face config.json of each model).
// mistral-7b is v0.1: rope_theta 10000, 32k positions with a 4096-token sliding window (the
// engine attends to the full context; v0.2 changed rope_theta to 1e6 and dropped the window).
// llama3-8b and qwen2-7b ship byte-level BPE vocabularies; only their sizes matter here.
constexpr ShapeEntry kShapes[] = {
    {"llama2-7b", "llama", 32000, 4096, 11008, 32, 32, 32, 4096, 1e-5f, 10000.0f, false, false},
    {"llama2-13b", "llama", 32000, 5120, 13824, 40, 40, 40, 4096, 1e-5f, 10000.0f, false, false},
    {"mistral-7b", "llama", 32000, 4096, 14336, 32, 32, 8, 32768, 1e-5f, 10000.0f, false, false},
    {"llama3-8b", "llama", 128256, 4096, 14336, 32, 32, 8, 8192, 1e-5f, 500000.0f, false, false},
    {"qwen2-7b", "qwen2", 152064, 3584, 18944, 28, 28, 4, 32768, 1e-6f, 1000000.0f, true, false},
    {"tinyllama-1b", "llama", 32000, 2048, 5632, 22, 32, 4, 2048, 1e-5f, 10000.0f, false, false},
    // A few-MB model for tests and the demo: every row length (256, 768) is a multiple of 256
    // so the K-quants apply; head_dim 32, grouped-query attention (8 query heads, 4 KV heads).
    {"tiny", "llama", 512, 256, 768, 4, 8, 4, 1024, 1e-5f, 10000.0f, false, false},
};

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
    c.arch = std::string(s.arch);
    c.name = std::string(s.name);
    c.n_vocab = s.n_vocab;
    c.dim = s.dim;
    c.n_ff = s.n_ff;
    c.n_layers = s.n_layers;
    c.n_heads = s.n_heads;
    c.n_kv_heads = s.n_kv_heads;
    c.head_dim = s.dim / s.n_heads;
    c.context_length = s.context_length;
    c.rms_eps = s.rms_eps;
    c.rope_theta = s.rope_theta;
    c.rope_style = s.arch == "qwen2" ? RopeStyle::kHalves : RopeStyle::kAdjacentPairs;
    c.qkv_bias = s.qkv_bias;
    c.tied_embeddings = s.tied;
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
    add_matrix(p + "attn_q.weight", dim, q_dim, ft.base);
    if (c.qkv_bias) add_f32(p + "attn_q.bias", q_dim);
    add_matrix(p + "attn_k.weight", dim, kv_dim, ft.base);
    if (c.qkv_bias) add_f32(p + "attn_k.bias", kv_dim);
    add_matrix(p + "attn_v.weight", dim, kv_dim, more);
    if (c.qkv_bias) add_f32(p + "attn_v.bias", kv_dim);
    add_matrix(p + "attn_output.weight", q_dim, dim, ft.base);
    add_f32(p + "ffn_norm.weight", dim);
    add_matrix(p + "ffn_gate.weight", dim, ff, ft.base);
    add_matrix(p + "ffn_up.weight", dim, ff, ft.base);
    add_matrix(p + "ffn_down.weight", ff, dim, more);
  }
  add_f32("output_norm.weight", dim);
  if (!c.rope_freq_factors.empty()) add_f32("rope_freqs.weight", c.head_dim / 2);
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
