// Tiny Hugging Face model folders built in tests: random float weights written as F32
// safetensors, or the same layers packed as GPTQ / AWQ 4-bit by a packer written here (so the
// loader's unpacking is checked against an independent packing of known weights).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/model_config.h"

namespace pinfer::testing {

// A small llama shape: dim 64, ffn 128, 2 layers, 4 heads, 2 KV heads, head dim 16, vocab 320.
ModelConfig TinyHfConfig();

// HF name -> (shape, row-major floats) for every tensor of the config (random, seeded).
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using FloatTensors = std::map<std::string, FloatTensor>;
FloatTensors RandomTinyWeights(const ModelConfig& c, uint64_t seed);

// The seven linear layers' HF stems of layer i ("model.layers.0.self_attn.q_proj", ...).
std::vector<std::string> LinearStems(int n_layers);

enum class PackKind { kGptq, kGptqActOrder, kAwq };

// Quantizes every linear layer of `weights` to 4 bits (asymmetric min/max per group), writes
// the packed folder to `packed_dir` and, in `weights`, replaces each layer by its exact
// dequantized value, so a float folder of the result is the packed model's reference.
absl::Status WritePackedFolder(const std::string& packed_dir, const ModelConfig& c,
                               FloatTensors& weights, PackKind kind, int group_size, uint64_t seed);

// config.json + tokenizer.json (a synthetic SentencePiece vocabulary) + model.safetensors (F32).
absl::Status WriteFloatFolder(const std::string& dir, const ModelConfig& c,
                              const FloatTensors& weights);

// config.json + the given tokenizer.json text (e.g. a byte-level BPE one from the shared
// models) + model.safetensors (F32). c.n_vocab must cover the tokenizer's ids.
absl::Status WriteFloatFolderWithTokenizer(const std::string& dir, const ModelConfig& c,
                                           const FloatTensors& weights,
                                           const std::string& tokenizer_json);

// config.json text for the config (extra JSON members appended verbatim when non-empty).
std::string HfConfigJson(const ModelConfig& c, const std::string& extra = "");

// Writes text to a file (replacing it).
absl::Status WriteFile(const std::string& path, const std::string& text);

}  // namespace pinfer::testing
