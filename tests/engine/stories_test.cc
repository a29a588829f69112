// stories260K (../shared/models/README.md): the CPU forward pass reproduces llama2.c's
// reference logits and its 200-token greedy story exactly.
#include <cmath>
#include <string>

#include "engine/engine.h"
#include "engine/model/model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using testing::Argmax;
using testing::SmallConfig;

constexpr char kStory[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
    "She said, \"I want to play with your ball, but I can't find it.\"\n"
    "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what "
    "to do.\"\n"
    "Lily didn't want to help her mom, so she";

struct Expected {
  int id;
  double logit;
  double printed_step;  // the figure's last printed digit: tolerance covers its rounding
};

void ExpectLogit(const std::vector<float>& logits, const Expected& e) {
  // Float32 engines agree to about 1e-4 (README); the figure itself is rounded.
  const double tol = 1e-4 + e.printed_step / 2;
  EXPECT_NEAR(logits[e.id], e.logit, tol) << "token " << e.id;
}

class Stories : public ::testing::Test {
 protected:
  void SetUp() override {
    PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  std::unique_ptr<Model> model_;
};

TEST_F(Stories, LogitsAfterBosMatchReference) {
  auto logits = testing::PromptLogits(*model_, SmallConfig(), {1});
  ASSERT_TRUE(logits.ok()) << logits.status();
  ASSERT_EQ(logits->size(), 512u);
  EXPECT_EQ(Argmax(*logits), 403);
  for (Expected e : {Expected{403, 17.0235, 1e-4},
                     {385, 15.4062, 1e-4},
                     {410, 13.1083, 1e-4},
                     {317, 12.7692, 1e-4},
                     {407, 12.4181, 1e-4},
                     {0, -6.22291, 1e-5},
                     {1, 8.40434, 1e-5},
                     {2, -6.22374, 1e-5},
                     {3, -6.22254, 1e-5},
                     {4, -6.22195, 1e-5}}) {
    ExpectLogit(*logits, e);
  }
}

TEST_F(Stories, LogitsAtPositionOneMatchReference) {
  auto logits = testing::PromptLogits(*model_, SmallConfig(), {1, 403});
  ASSERT_TRUE(logits.ok()) << logits.status();
  EXPECT_EQ(Argmax(*logits), 407);
  for (Expected e : {Expected{407, 18.46, 1e-2}, {383, 14.2911, 1e-4}, {261, 10.898, 1e-3}}) {
    ExpectLogit(*logits, e);
  }
}

TEST_F(Stories, GreedyStoryMatchesLlama2c) {
  auto tokens = testing::GreedyTokens(*model_, SmallConfig(), {1}, 200);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  StreamDecoder dec(model_->tokenizer());
  std::string text;
  for (int32_t t : *tokens) text += dec.Push(t);
  text += dec.Flush();
  EXPECT_EQ(text, kStory);
}

TEST_F(Stories, TokenizerExamples) {
  const Tokenizer& tok = model_->tokenizer();
  EXPECT_THAT(tok.Encode("Once upon a time", true), ::testing::ElementsAre(1, 403, 407, 261, 378));
  EXPECT_THAT(tok.Encode("Lily", true), ::testing::ElementsAre(1, 317));
  EXPECT_THAT(tok.Encode("Hello world", true),
              ::testing::ElementsAre(1, 346, 306, 414, 263, 304, 341));
}

}  // namespace
}  // namespace pinfer
