// Any weight format runs with any KV format: synthetic `tiny` models written in each weight
// type, each run with each KV format, give finite logits and complete a short generation.
#include <cmath>
#include <filesystem>

#include "engine/model/model.h"
#include "engine/synth/synth.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

class WeightsTimesKv : public ::testing::TestWithParam<const char*> {};

TEST_P(WeightsTimesKv, EveryKvFormatRuns) {
  const std::string path = testing::TempDir("wxkv") + "/tiny-" + std::string(GetParam()) + ".gguf";
  ASSERT_TRUE(WriteSynthModel("tiny", GetParam(), path, SynthOptions{}).ok());
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> prompt = (*model)->tokenizer().Encode("Once upon a time", true);
  for (KvDtype kv : kAllKvDtypes) {
    SCOPED_TRACE(std::string(KvDtypeName(kv)));
    auto logits = testing::PromptLogits(**model, testing::SmallConfig(kv), prompt);
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(logits->size(), static_cast<size_t>((*model)->config().n_vocab));
    double energy = 0;
    for (float x : *logits) {
      ASSERT_TRUE(std::isfinite(x));
      energy += x * x;
    }
    EXPECT_GT(energy, 0) << "logits are all zero";
    auto tokens = testing::GreedyTokens(**model, testing::SmallConfig(kv), prompt, 8);
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    EXPECT_FALSE(tokens->empty());
  }
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

INSTANTIATE_TEST_SUITE_P(WeightFormats, WeightsTimesKv,
                         ::testing::Values("F32", "F16", "Q8_0", "Q4_0", "Q4_K_M"));

}  // namespace
}  // namespace pinfer
