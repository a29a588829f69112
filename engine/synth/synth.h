// Synthetic models: a Llama-shaped GGUF with a SentencePiece-style vocabulary and seeded
// random weights, for tests, benchmarks and `pagedinfer synth`. Weights are generated and
// quantized row by row while the file is written (GgufWriter fill callbacks), so memory stays
// at one tensor's bytes however large the model. The same seed gives the same file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/model/model_config.h"
#include "engine/model/model_shapes.h"
#include "loaders/gguf.h"

namespace pinfer {

struct SynthOptions {
  uint64_t seed = 1;
  int threads = 0;  // workers generating rows; 0: all hardware threads
  // WriteSynthModel: > 0 keeps only the shape's first n_layers layers (every width as the
  // shape's: a 7B's matrices at a fraction of its size, for quick checks); 0: all.
  int n_layers = 0;
};

// Adds the model's metadata (general.*, {arch}.* hyper-parameters as llama.cpp names them,
// tokenizer.ggml.*) and its tensors (PlanTensors order, data filled at write time) to `w`.
// The writer keeps copies of `config`, `ft` and `options` in its callbacks.
absl::Status AddSynthModel(const ModelConfig& config, const FileType& ft,
                           const SynthOptions& options, GgufWriter* w);

// A named shape (see NamedShape) stored as a file type (see ParseFileType), written to path.
absl::Status WriteSynthModel(std::string_view shape, std::string_view file_type,
                             const std::string& path, const SynthOptions& options);

}  // namespace pinfer
