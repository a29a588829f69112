// The weights x KV-format quality table: from one float model, each weight format is made with
// QuantizeGguf (a temporary file), and each is run with each KV format over the same text.
// Every cell holds the perplexity and the KL divergence against the reference run (the first
// weight format, normally F32, with the first KV format, normally f32).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/eval/kl_divergence.h"
#include "engine/eval/perplexity.h"
#include "kvcache/kv_dtype.h"

namespace pinfer {

struct QualityOptions {
  std::vector<std::string> weight_formats = {"F32", "F16", "Q8_0", "Q5_1", "Q4_0", "Q4_K_M"};
  std::vector<KvDtype> kv_formats = {std::begin(kAllKvDtypes), std::end(kAllKvDtypes)};
  int n_ctx = 128;
  int threads = 0;
  std::string temp_dir;  // where the quantized copies go ("": the system's temp folder)
  // Progress: one line per finished cell, and QuantizeGguf's per-tensor notes.
  std::function<void(const std::string& line)> log;
};

struct QualityCell {
  PerplexityResult ppl;
  KlStats kl;
};

struct QualityRow {
  std::string weight_format;
  std::string weight_summary;  // Model::WeightFormat() of the quantized copy
  uint64_t weight_bytes = 0;
  std::vector<QualityCell> cells;  // one per KV format, in QualityOptions order
};

struct QualityTable {
  std::string model_path;
  int64_t n_tokens = 0;  // the whole text, tokenized
  int n_ctx = 0, n_chunks = 0;
  int64_t scored = 0;
  std::vector<KvDtype> kv_formats;
  std::vector<uint64_t> kv_bytes_per_token;  // per KV format
  std::vector<QualityRow> rows;
  double seconds = 0;
};

absl::StatusOr<QualityTable> BuildQualityTable(const std::string& model_path,
                                               const std::string& text,
                                               const QualityOptions& options);

}  // namespace pinfer
