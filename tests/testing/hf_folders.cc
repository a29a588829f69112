#include "tests/testing/hf_folders.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/convert/hf_export.h"
#include "engine/synth/synth_data.h"
#include "loaders/fp16.h"
#include "loaders/safetensors.h"

namespace pinfer::testing {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

StTensorData F32Tensor(const std::string& name, const FloatTensor& t) {
  return StTensorData{name, StDtype::kF32, t.shape, Bytes(t.values)};
}

// One linear layer quantized and packed.
struct Packed {
  std::vector<StTensorData> tensors;
  std::vector<float> dequantized;  // [out x in]
};

constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// A layer's 4-bit quantization before packing: per (group, output) an fp16 scale and a zero
// point, the codes [out x in], and the values they stand for.
struct Quantized {
  std::vector<int32_t> g_idx;      // [in]: each input column's group
  std::vector<uint16_t> scales;    // [groups x out]
  std::vector<int> zeros;          // [groups x out]
  std::vector<int> q;              // [out x in]
  std::vector<float> dequantized;  // [out x in]
};

// Min/max scales per group (GPTQ keeps zero points >= 1: it stores zero - 1); act order
// shuffles which input columns form each group.
Quantized Quantize4(const FloatTensor& w, PackKind kind, int gs, std::mt19937_64& rng) {
  const int64_t out = w.shape[0], in = w.shape[1], groups = in / gs;
  const bool gptq = kind != PackKind::kAwq;
  Quantized z;
  z.g_idx.resize(static_cast<size_t>(in));
  std::vector<int32_t> order(static_cast<size_t>(in));
  std::iota(order.begin(), order.end(), 0);
  if (kind == PackKind::kGptqActOrder) std::shuffle(order.begin(), order.end(), rng);
  for (int64_t k = 0; k < in; ++k) z.g_idx[order[k]] = static_cast<int32_t>(k / gs);
  z.scales.resize(static_cast<size_t>(groups * out));
  z.zeros.resize(static_cast<size_t>(groups * out));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t o = 0; o < out; ++o) {
      float mn = 0, mx = 0;
      for (int64_t i = 0; i < in; ++i) {
        if (z.g_idx[i] != g) continue;
        mn = std::min(mn, w.values[o * in + i]);
        mx = std::max(mx, w.values[o * in + i]);
      }
      const uint16_t s16 = Fp32ToFp16(std::max((mx - mn) / 15.0f, 1e-4f));
      const float s = Fp16ToFp32(s16);
      z.scales[g * out + o] = s16;
      z.zeros[g * out + o] = std::clamp(static_cast<int>(std::lround(-mn / s)), gptq ? 1 : 0, 15);
    }
  }
  z.dequantized.resize(static_cast<size_t>(out * in));
  z.q.resize(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      const int64_t gi = z.g_idx[i] * out + o;
      const float s = Fp16ToFp32(z.scales[gi]);
      const int v =
          std::clamp(static_cast<int>(std::lround(w.values[o * in + i] / s)) + z.zeros[gi], 0, 15);
      z.q[o * in + i] = v;
      z.dequantized[o * in + i] = s * static_cast<float>(v - z.zeros[gi]);
    }
  }
  return z;
}

// GPTQ's layout: qweight [in / 8 x out] (8 input rows per word), qzeros of zero - 1, g_idx.
void PackGptq(const std::string& stem, const Quantized& z, int64_t out, int64_t in, int64_t groups,
              Packed* p) {
  std::vector<int32_t> qweight(static_cast<size_t>(in / 8 * out), 0);
  for (int64_t r = 0; r < in / 8; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) word |= static_cast<uint32_t>(z.q[o * in + 8 * r + j]) << (4 * j);
      qweight[r * out + o] = static_cast<int32_t>(word);
    }
  }
  std::vector<int32_t> qzeros(static_cast<size_t>(groups * out / 8), 0);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < out / 8; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) {
        word |= static_cast<uint32_t>(z.zeros[g * out + 8 * c + j] - 1) << (4 * j);
      }
      qzeros[g * (out / 8) + c] = static_cast<int32_t>(word);
    }
  }
  p->tensors.push_back({stem + ".qweight", StDtype::kI32, {in / 8, out}, Bytes(qweight)});
  p->tensors.push_back({stem + ".qzeros", StDtype::kI32, {groups, out / 8}, Bytes(qzeros)});
  p->tensors.push_back({stem + ".scales", StDtype::kF16, {groups, out}, Bytes(z.scales)});
  p->tensors.push_back({stem + ".g_idx", StDtype::kI32, {in}, Bytes(z.g_idx)});
}

// AWQ's layout: qweight [in x out / 8] with the outputs of each word in kAwqOrder.
void PackAwq(const std::string& stem, const Quantized& z, int64_t out, int64_t in, int64_t groups,
             Packed* p) {
  std::vector<int32_t> qweight(static_cast<size_t>(in * out / 8), 0);
  for (int64_t i = 0; i < in; ++i) {
    for (int64_t c = 0; c < out / 8; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) {
        word |= static_cast<uint32_t>(z.q[(8 * c + kAwqOrder[j]) * in + i]) << (4 * j);
      }
      qweight[i * (out / 8) + c] = static_cast<int32_t>(word);
    }
  }
  std::vector<int32_t> qzeros(static_cast<size_t>(groups * out / 8), 0);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < out / 8; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < 8; ++j) {
        word |= static_cast<uint32_t>(z.zeros[g * out + 8 * c + kAwqOrder[j]]) << (4 * j);
      }
      qzeros[g * (out / 8) + c] = static_cast<int32_t>(word);
    }
  }
  p->tensors.push_back({stem + ".qweight", StDtype::kI32, {in, out / 8}, Bytes(qweight)});
  p->tensors.push_back({stem + ".qzeros", StDtype::kI32, {groups, out / 8}, Bytes(qzeros)});
  p->tensors.push_back({stem + ".scales", StDtype::kF16, {groups, out}, Bytes(z.scales)});
}

Packed Pack(const std::string& stem, const FloatTensor& w, PackKind kind, int gs,
            std::mt19937_64& rng) {
  const int64_t out = w.shape[0], in = w.shape[1], groups = in / gs;
  Quantized z = Quantize4(w, kind, gs, rng);
  Packed p;
  if (kind == PackKind::kAwq) {
    PackAwq(stem, z, out, in, groups, &p);
  } else {
    PackGptq(stem, z, out, in, groups, &p);
  }
  p.dequantized = std::move(z.dequantized);
  return p;
}

absl::Status WriteCommon(const std::string& dir, const ModelConfig& c) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  absl::StatusOr<TokenizerSpec> spec = SynthVocabulary(c.n_vocab, c.arch);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::string> tok = HfTokenizerJson(*spec);
  if (!tok.ok()) return tok.status();
  if (absl::Status s = WriteFile(dir + "/tokenizer.json", *tok); !s.ok()) return s;
  return WriteFile(dir + "/config.json", HfConfigJson(c));
}

}  // namespace

ModelConfig TinyHfConfig() {
  ModelConfig c;
  c.arch = "llama";
  c.n_vocab = 320;
  c.dim = 64;
  c.n_ff = 128;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.context_length = 256;
  c.rms_eps = 1e-5f;
  c.rope_style = RopeStyle::kHalves;
  return c;
}

std::vector<std::string> LinearStems(int n_layers) {
  std::vector<std::string> out;
  for (int i = 0; i < n_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    for (const char* s : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                          "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
      out.push_back(p + s);
    }
  }
  return out;
}

FloatTensors RandomTinyWeights(const ModelConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  FloatTensors t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean, float sd) {
    FloatTensor& f = t[name];
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    f.shape = std::move(shape);
    for (int64_t i = 0; i < n; ++i) f.values.push_back(mean + sd * normal(rng));
  };
  add("model.embed_tokens.weight", {c.n_vocab, c.dim}, 0, 1.0f);
  add("model.norm.weight", {c.dim}, 1, 0.1f);
  add("lm_head.weight", {c.n_vocab, c.dim}, 0, 0.2f);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    add(p + "input_layernorm.weight", {c.dim}, 1, 0.1f);
    add(p + "post_attention_layernorm.weight", {c.dim}, 1, 0.1f);
    add(p + "self_attn.q_proj.weight", {c.q_dim(), c.dim}, 0, 0.15f);
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), c.dim}, 0, 0.15f);
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), c.dim}, 0, 0.15f);
    add(p + "self_attn.o_proj.weight", {c.dim, c.q_dim()}, 0, 0.15f);
    add(p + "mlp.gate_proj.weight", {c.n_ff, c.dim}, 0, 0.15f);
    add(p + "mlp.up_proj.weight", {c.n_ff, c.dim}, 0, 0.15f);
    add(p + "mlp.down_proj.weight", {c.dim, c.n_ff}, 0, 0.1f);
  }
  return t;
}

absl::Status WritePackedFolder(const std::string& dir, const ModelConfig& c, FloatTensors& weights,
                               PackKind kind, int group_size, uint64_t seed) {
  if (absl::Status s = WriteCommon(dir, c); !s.ok()) return s;
  std::mt19937_64 rng(seed);
  std::vector<StTensorData> out;
  for (const std::string& stem : LinearStems(c.n_layers)) {
    FloatTensor& w = weights.at(stem + ".weight");
    Packed p = Pack(stem, w, kind, group_size, rng);
    w.values = std::move(p.dequantized);
    for (StTensorData& t : p.tensors) out.push_back(std::move(t));
  }
  for (const auto& [name, t] : weights) {
    if (name.find("_proj.weight") == std::string::npos) out.push_back(F32Tensor(name, t));
  }
  if (absl::Status s = WriteSafetensors(dir + "/model.safetensors", out, {}); !s.ok()) return s;
  if (kind == PackKind::kAwq) {
    return WriteFile(dir + "/quant_config.json",
                     absl::StrCat("{\"zero_point\": true, \"q_group_size\": ", group_size,
                                  ", \"w_bit\": 4, \"version\": \"GEMM\"}"));
  }
  return WriteFile(
      dir + "/quantize_config.json",
      absl::StrCat("{\"bits\": 4, \"group_size\": ", group_size, ", \"desc_act\": ",
                   kind == PackKind::kGptqActOrder ? "true" : "false", ", \"sym\": false}"));
}

absl::Status WriteFloatFolder(const std::string& dir, const ModelConfig& c,
                              const FloatTensors& weights) {
  if (absl::Status s = WriteCommon(dir, c); !s.ok()) return s;
  std::vector<StTensorData> out;
  for (const auto& [name, t] : weights) out.push_back(F32Tensor(name, t));
  return WriteSafetensors(dir + "/model.safetensors", out, {});
}

absl::Status WriteFloatFolderWithTokenizer(const std::string& dir, const ModelConfig& c,
                                           const FloatTensors& weights,
                                           const std::string& tokenizer_json) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (absl::Status s = WriteFile(dir + "/tokenizer.json", tokenizer_json); !s.ok()) return s;
  if (absl::Status s = WriteFile(dir + "/config.json", HfConfigJson(c)); !s.ok()) return s;
  std::vector<StTensorData> out;
  for (const auto& [name, t] : weights) out.push_back(F32Tensor(name, t));
  return WriteSafetensors(dir + "/model.safetensors", out, {});
}

std::string HfConfigJson(const ModelConfig& c, const std::string& extra) {
  return absl::StrCat(
      "{\"architectures\": [\"", c.arch == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM",
      "\"], \"hidden_size\": ", c.dim, ", \"intermediate_size\": ", c.n_ff,
      ", \"num_hidden_layers\": ", c.n_layers, ", \"num_attention_heads\": ", c.n_heads,
      ", \"num_key_value_heads\": ", c.n_kv_heads, ", \"head_dim\": ", c.head_dim,
      ", \"vocab_size\": ", c.n_vocab, ", \"max_position_embeddings\": ", c.context_length,
      ", \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false",
      extra.empty() ? "" : ", ", extra, "}");
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace pinfer::testing
