// KL divergence between a base model's next-token distributions and a test model's, over the
// positions a perplexity run scores, and the file that carries the base's log-probabilities
// from one run to the next (pagedinfer perplexity --kl-base FILE, then --kl FILE).
//
// File layout (little-endian): "PINFKLB1" (8 bytes), u32 n_vocab, u32 n_ctx, u32 n_chunks,
// u32 first, u64 n_positions, then int32 tokens[n_chunks * n_ctx] (the text's tokens, to check
// both runs read the same text), then float32 log_probs[n_positions][n_vocab].
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/eval/perplexity.h"

namespace pinfer {

struct KlStats {
  int64_t count = 0;
  double mean_kl = 0, kl_stderr = 0;
  double p99_kl = 0, max_kl = 0;
  double top1_agreement = 0;  // fraction of positions whose argmax is the same
};

// Accumulates KL(base || test) = sum_i p_base[i] (log p_base[i] - log p_test[i]) per position.
class KlAccumulator {
 public:
  void Add(const float* base_log_probs, const float* test_log_probs, int n_vocab);
  KlStats Result() const;

 private:
  std::vector<double> kl_;
  int64_t same_top_ = 0;
};

class KlBaseWriter {
 public:
  static absl::StatusOr<std::unique_ptr<KlBaseWriter>> Create(const std::string& path,
                                                              const PerplexityPlan& plan,
                                                              int n_vocab);
  ~KlBaseWriter();
  absl::Status Add(const float* log_probs, int n_vocab);
  absl::Status Close();  // checks every position was written

 private:
  KlBaseWriter() = default;
  std::string path_;
  std::FILE* f_ = nullptr;
  int64_t expected_ = 0, written_ = 0;
};

class KlBaseReader {
 public:
  // FailedPrecondition when the file was made from another text, context or vocabulary.
  static absl::StatusOr<std::unique_ptr<KlBaseReader>> Open(const std::string& path,
                                                            const PerplexityPlan& plan,
                                                            int n_vocab);
  ~KlBaseReader();
  // The base log-probabilities of the next position (n_vocab values, valid until next call).
  absl::StatusOr<const float*> Next();

 private:
  KlBaseReader() = default;
  std::string path_;
  std::FILE* f_ = nullptr;
  std::vector<float> row_;
  int64_t remaining_ = 0;
};

}  // namespace pinfer
