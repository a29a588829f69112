// Synthetic models written to temporary files for tests: a named shape (engine/synth) with
// seed 1, optionally without its sliding window (the same tensors; only the metadata differs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"

namespace pinfer::testing {

// `synth --shape shape --type type --seed 1` written to a temporary file: its path ("" after
// a test failure on error). For tests that hand a file to the pagedinfer binary.
std::string SynthModelPath(const std::string& shape, const std::string& type,
                           bool no_window = false);

// `synth --shape shape --type type --seed 1`, loaded. no_window: the shape's per-layer
// attention entries cleared before writing. nullptr (after a test failure) on error.
std::unique_ptr<Model> SynthModel(const std::string& shape, const std::string& type,
                                  bool no_window = false);

// EXPECTs that `got` has want's architecture features, RoPE bases and scales and per-layer
// attention (not the RoPE pair order, which a Hugging Face folder of a llama model changes).
void ExpectSameArchitecture(const ModelConfig& got, const ModelConfig& want);

// A prompt past every tiny-* window (32 tokens): BOS and 99 ids spread over a 512-token
// vocabulary.
std::vector<int32_t> LongPrompt();

}  // namespace pinfer::testing
