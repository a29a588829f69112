// A loaded model: hyper-parameters, weights in their storage types, and the tokenizer.
// Owns whatever backs the weights (the mapped GGUF file or safetensors files, or repacked
// buffers).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/weights.h"
#include "loaders/tokenizer.h"

namespace pinfer {

class GgufFile;
class SafetensorsModel;

// One tensor as the model stores it (after any repacking at load): for counts and reports.
struct StoredTensor {
  std::string name;  // GGUF-style name ("blk.0.attn_q.weight")
  GgmlType type = GgmlType::kF32;
  int64_t n_elements = 0;
  uint64_t bytes = 0;
};

class Model {
 public:
  // A GGUF file, or a Hugging Face model folder (config.json, *.safetensors, tokenizer.json;
  // F32/F16/BF16 weights, or GPTQ/AWQ 4-bit layers repacked to Q4_1). Errors say what is wrong
  // with the file or folder and, where possible, what to do.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Model>> FromGguf(std::unique_ptr<GgufFile> file);
  // A Hugging Face model folder (engine/hf_model.cc).
  static absl::StatusOr<std::unique_ptr<Model>> FromHfFolder(const std::string& folder);
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& path() const { return path_; }
  // The weights' storage types by size, largest first: "Q4_K 3686.4 MiB, Q6_K 512.0 MiB,
  // F32 0.3 MiB" (MiB with one decimal; "" for a model without weights).
  std::string WeightFormat() const;
  // The GGUF file, when the model came from one (nullptr otherwise).
  const GgufFile* gguf() const { return gguf_.get(); }
  // The safetensors checkpoint, when the model came from a Hugging Face folder.
  const SafetensorsModel* safetensors() const { return safetensors_.get(); }
  // Every tensor the model holds, in its stored type (GGUF: the file's tensors; Hugging Face:
  // the tensors bound, GPTQ/AWQ layers counted as their Q4_1 repack).
  const std::vector<StoredTensor>& stored_tensors() const { return stored_; }
  // "gguf", "safetensors", or "safetensors (gptq 4-bit -> Q4_1)" and the like.
  const std::string& source_format() const { return source_format_; }

  // The memory the weight matrices occupy, as address ranges in address order, merged where
  // matrices lie less than kWeightRangeGap bytes apart (alignment padding): every byte of a
  // range then lies in a page that holds weights, so the ranges can be paged in, locked and
  // measured page by page. mapped: pages of the model file(s), which the OS may drop under
  // memory pressure and read back; else a buffer the model owns (GPTQ/AWQ layers repacked at
  // load).
  struct WeightRange {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
    bool mapped = true;
  };
  // excluded: matrices whose bytes a backend holds elsewhere (its repacked copies, see
  // engine/cpu/repack.h): their ranges are left out (the pages they share with a matrix kept
  // stay in its range).
  static constexpr size_t kWeightRangeGap = 4096;
  std::vector<WeightRange> WeightRanges(
      const std::vector<const WeightMatrix*>& excluded = {}) const;
  // Whether m's bytes lie in a buffer the model owns (GPTQ/AWQ layers repacked at load) rather
  // than in a mapped file.
  bool OwnsMatrix(const WeightMatrix& m) const;

 private:
  Model() = default;
  std::string path_;
  std::string source_format_;
  ModelConfig config_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<SafetensorsModel> safetensors_;
  std::vector<std::vector<uint8_t>> owned_;  // repacked weights the WeightMatrix views point into
  std::vector<StoredTensor> stored_;
};

}  // namespace pinfer
