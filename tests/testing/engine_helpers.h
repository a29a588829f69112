// Helpers for tests that run a model through the engine.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"

namespace pinfer::testing {

// Runs one greedy request alone and returns its output tokens (backend nullptr: the CPU's;
// first_logits, when given, receives the logits after the prompt).
absl::StatusOr<std::vector<int32_t>> GreedyTokens(const Model& model, EngineConfig config,
                                                  std::vector<int32_t> prompt, int max_tokens,
                                                  std::unique_ptr<Backend> backend = nullptr,
                                                  std::vector<float>* first_logits = nullptr);

// The logits after the last prompt token of a request run alone.
absl::StatusOr<std::vector<float>> PromptLogits(const Model& model, EngineConfig config,
                                                std::vector<int32_t> prompt);

// A fixture holding stories260K (../shared/models), loaded for each test; the test is skipped,
// naming the folder, when the file is absent.
class StoriesFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  std::unique_ptr<Model> model_;
};

// What one completion produced over the engine's steps.
struct Completion {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  int cached_prompt_tokens = 0;
};
// Steps the engine until it has no work; every completion by (request id, index).
absl::StatusOr<std::map<std::pair<int64_t, int>, Completion>> RunToEnd(Engine& engine);

// A small engine config for tests: pool given in bytes, few threads, quiet.
EngineConfig SmallConfig(KvDtype dtype = KvDtype::kF32, KvLayout layout = KvLayout::kPaged);

// Largest |a - b| and the relative L2 error ||a - b|| / ||b||.
struct Diff {
  double max_abs = 0, rel_l2 = 0;
};
Diff Compare(const std::vector<float>& a, const std::vector<float>& b);

int Argmax(const std::vector<float>& v);

}  // namespace pinfer::testing
