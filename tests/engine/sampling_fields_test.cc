// The request fields the sampler honours, each checked for its effect on a real model
// (stories260K) against the formula, computed here from the raw logits the engine saw:
// repetition penalty (vLLM's whole-sequence window and llama.cpp's last-n window), OpenAI's
// presence and frequency penalties over the output, logit_bias, logprobs / top_logprobs (the
// log-softmax of the raw logits, to 1e-4), random seeds when none is given, and the
// continuation's leading space (prompt text + completion text == the text of all the tokens,
// for SentencePiece and byte-level BPE vocabularies).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/logprobs.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/hf_folders.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

struct Generated {
  std::vector<int32_t> prompt, tokens;
  std::string text;
  std::vector<SampledLogprobs> logprobs;
  std::vector<std::vector<float>> raw;  // the logits row of each sampled position
};

Generated Generate(const Model& model, const std::string& prompt, SamplingParams p) {
  Generated g;
  auto e = Engine::Create(model, testing::SmallConfig(), nullptr, /*quiet=*/true);
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return g;
  (*e)->SetLogitsObserver(
      [&](int64_t, int, const float* l, int n) { g.raw.emplace_back(l, l + n); });
  GenerationRequest req;
  req.prompt = model.tokenizer().Encode(prompt, /*add_special=*/true);
  g.prompt = req.prompt;
  req.params = std::move(p);
  auto rid = (*e)->AddRequest(req);
  EXPECT_TRUE(rid.ok()) << rid.status();
  while (rid.ok() && (*e)->HasWork()) {
    auto step = (*e)->Step();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    for (const SequenceOutput& o : *step) {
      g.tokens.insert(g.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      g.logprobs.insert(g.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      g.text += o.new_text;
    }
  }
  return g;
}

SamplingParams Greedy(int n) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class SamplingFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::ModelPath("stories260K.gguf");
    if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under " << testing::ModelsDir();
    auto m = Model::Load(path);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
  }
  // Checks that each sampled token is the argmax of `adjust`ed raw logits, given the tokens
  // before it (prompt and output so far).
  template <typename Adjust>
  void ExpectFormula(const Generated& g, Adjust adjust) {
    ASSERT_EQ(g.raw.size(), g.tokens.size());
    std::vector<int32_t> history = g.prompt;
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      std::vector<float> s = g.raw[i];
      adjust(history, &s);
      EXPECT_EQ(g.tokens[i], Argmax(s)) << "step " << i;
      history.push_back(g.tokens[i]);
    }
  }
  std::unique_ptr<Model> model_;
};

void Repetition(const std::vector<int32_t>& history, size_t window, float penalty,
                std::vector<float>* s) {
  const size_t n = std::min(window, history.size());
  std::vector<int32_t> seen(history.end() - (ptrdiff_t)n, history.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) (*s)[t] = (*s)[t] > 0 ? (*s)[t] / penalty : (*s)[t] * penalty;
}

TEST_F(SamplingFieldsTest, RepetitionPenaltyOverTheWholeSequenceAndOverTheLastN) {
  const Generated plain = Generate(*model_, "Once upon a time", Greedy(64));
  for (int last_n : {-1, 8}) {
    SamplingParams p = Greedy(64);
    p.repetition_penalty = 1.5f;
    p.repeat_last_n = last_n;
    const Generated g = Generate(*model_, "Once upon a time", p);
    EXPECT_NE(g.tokens, plain.tokens) << "the penalty changed nothing (last_n " << last_n << ")";
    const size_t window = last_n < 0 ? SIZE_MAX : static_cast<size_t>(last_n);
    ExpectFormula(g, [&](const std::vector<int32_t>& h, std::vector<float>* s) {
      Repetition(h, window, 1.5f, s);
    });
  }
}

TEST_F(SamplingFieldsTest, PresenceAndFrequencyPenaltiesCountTheOutputOnly) {
  const Generated plain = Generate(*model_, "Once upon a time", Greedy(64));
  SamplingParams p = Greedy(64);
  p.frequency_penalty = 0.7f;
  p.presence_penalty = 0.4f;
  const Generated g = Generate(*model_, "Once upon a time", p);
  EXPECT_NE(g.tokens, plain.tokens);
  const size_t prompt = g.prompt.size();
  ExpectFormula(g, [&](const std::vector<int32_t>& h, std::vector<float>* s) {
    std::map<int32_t, int> count;
    for (size_t i = prompt; i < h.size(); ++i) ++count[h[i]];
    for (auto [t, c] : count) (*s)[t] -= 0.7f * static_cast<float>(c) + 0.4f;
  });
}

TEST_F(SamplingFieldsTest, LogitBiasBansAndForces) {
  const Generated plain = Generate(*model_, "Once upon a time", Greedy(32));
  ASSERT_FALSE(plain.tokens.empty());
  const int32_t first = plain.tokens[0];
  SamplingParams ban = Greedy(32);
  ban.logit_bias = {{first, -100.0f}};
  const Generated banned = Generate(*model_, "Once upon a time", ban);
  EXPECT_EQ(std::count(banned.tokens.begin(), banned.tokens.end(), first), 0);
  ExpectFormula(banned,
                [&](const std::vector<int32_t>&, std::vector<float>* s) { (*s)[first] -= 100.0f; });
  SamplingParams force = Greedy(8);
  force.logit_bias = {{300, 100.0f}};
  const Generated forced = Generate(*model_, "Once upon a time", force);
  EXPECT_EQ(forced.tokens, std::vector<int32_t>(8, 300));
}

TEST_F(SamplingFieldsTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  SamplingParams p = Greedy(24);
  p.logprobs = 5;
  p.frequency_penalty = 0.5f;  // the reported values are of the raw logits, before penalties
  const Generated g = Generate(*model_, "Once upon a time", p);
  ASSERT_EQ(g.logprobs.size(), g.tokens.size());
  for (size_t i = 0; i < g.tokens.size(); ++i) {
    const std::vector<float>& raw = g.raw[i];
    double mx = *std::max_element(raw.begin(), raw.end()), sum = 0;
    for (float v : raw) sum += std::exp(v - mx);
    auto lsm = [&](int32_t t) { return raw[t] - mx - std::log(sum); };
    EXPECT_EQ(g.logprobs[i].chosen.token, g.tokens[i]);
    EXPECT_NEAR(g.logprobs[i].chosen.logprob, lsm(g.tokens[i]), 1e-4);
    ASSERT_EQ(g.logprobs[i].top.size(), 5u);
    EXPECT_EQ(g.logprobs[i].top[0].token, Argmax(raw));
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_NEAR(g.logprobs[i].top[k].logprob, lsm(g.logprobs[i].top[k].token), 1e-4);
      if (k > 0) {
        EXPECT_GE(g.logprobs[i].top[k - 1].logprob, g.logprobs[i].top[k].logprob);
      }
    }
  }
  SamplingParams none = Greedy(4);
  EXPECT_TRUE(Generate(*model_, "Once", none).logprobs.empty());
}

TEST_F(SamplingFieldsTest, NoSeedDrawsOneSameSeedRepeats) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.max_tokens = 64;
  p.ignore_eos = true;
  const Generated a = Generate(*model_, "Once upon a time", p);
  const Generated b = Generate(*model_, "Once upon a time", p);
  EXPECT_NE(a.tokens, b.tokens) << "two seedless requests gave the same 64 tokens";
  p.seed = 1234;
  const Generated c = Generate(*model_, "Once upon a time", p);
  const Generated d = Generate(*model_, "Once upon a time", p);
  EXPECT_EQ(c.tokens, d.tokens);
  EXPECT_EQ(c.text, d.text);
}

// prompt text + completion text is the text of prompt + completion tokens.
void ExpectContinuation(const Model& m, const std::string& prompt) {
  const Generated g = Generate(m, prompt, Greedy(24));
  std::vector<int32_t> all = g.prompt;
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  EXPECT_EQ(prompt + g.text, m.tokenizer().Decode(all)) << "prompt '" << prompt << "'";
}

TEST_F(SamplingFieldsTest, TheFirstTokenKeepsItsSpaceSentencePiece) {
  // "Once upon" continues " a time": the space belongs to the continuation.
  const Generated g = Generate(*model_, "Once upon", Greedy(4));
  EXPECT_EQ(g.text.substr(0, 7), " a time") << g.text;
  for (const char* p : {"Once upon", "Once upon a time", "The cat sat on the", "Lily"}) {
    ExpectContinuation(*model_, p);
  }
  // From BOS alone the text starts a story: no leading space.
  EXPECT_EQ(Generate(*model_, "", Greedy(4)).text.substr(0, 4), "Once");
}

TEST(SamplingFieldsBpe, TheFirstTokenKeepsItsSpaceByteLevelBpe) {
  PINFER_REQUIRE_MODEL(tok_path, "tokenizers/qwen2-style-bpe2k/tokenizer.json");
  std::ifstream in(tok_path);
  std::stringstream json;
  json << in.rdbuf();
  ModelConfig c = testing::TinyHfConfig();
  c.n_vocab = 2003;  // 2000 BPE pieces and three added tokens
  const std::string dir = testing::TempDir("bpe_continuation");
  ASSERT_TRUE(
      testing::WriteFloatFolderWithTokenizer(dir, c, testing::RandomTinyWeights(c, 5), json.str())
          .ok());
  auto m = Model::Load(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ((*m)->tokenizer().spec().kind, TokenizerSpec::Kind::kBytePairGpt2);
  for (const char* p : {"Once upon", "Hello world, this is", "a"}) ExpectContinuation(**m, p);
}

}  // namespace
}  // namespace pinfer
