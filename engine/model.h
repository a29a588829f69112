// A loaded model: hyper-parameters, weights in their storage types, and the tokenizer.
// Owns whatever backs the weights (the mapped GGUF file, or repacked buffers).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model_config.h"
#include "engine/weights.h"
#include "loaders/tokenizer.h"

namespace pinfer {

class GgufFile;

class Model {
 public:
  // A GGUF file. Errors say what is wrong with the file and, where possible, what to do.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Model>> FromGguf(std::unique_ptr<GgufFile> file);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& path() const { return path_; }
  // "Q4_K_M-like mix (Q4_K 3.6 GiB, Q6_K 0.5 GiB, F32 ...)" style summary of storage types.
  std::string WeightFormat() const;
  // The GGUF file, when the model came from one (nullptr otherwise).
  const GgufFile* gguf() const { return gguf_.get(); }

 private:
  Model() = default;
  std::string path_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<GgufFile> gguf_;
};

}  // namespace pinfer
