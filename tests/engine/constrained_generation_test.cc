// Grammar-constrained generation through the engine on a real model (stories260K, a story
// model that knows nothing of JSON): a JSON schema's answers parse and validate in every
// seeded request while the same requests unconstrained do not parse; the mask holds in every
// sampler path (greedy, temperature with top-k/top-p/min-p, penalties, logit_bias pushing a
// forbidden token); the grammar ends a sequence; stop strings, n > 1, preemption and the
// prefix cache keep working; logprobs stay the raw logits'.
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/logprobs.h"
#include "engine/model/model.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/json_schema_check.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using json = nlohmann::json;
using testing::Completion;

const json kSchema = json::parse(testing::kStorySchema);

std::shared_ptr<const grammar::Grammar> Compile(const std::string& gbnf) {
  auto g = grammar::CompileGrammar(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

std::shared_ptr<const grammar::Grammar> SchemaGrammar() {
  auto gbnf = grammar::JsonSchemaToGbnf(nlohmann::ordered_json::parse(testing::kStorySchema));
  EXPECT_TRUE(gbnf.ok()) << gbnf.status();
  return gbnf.ok() ? Compile(*gbnf) : nullptr;
}

SamplingParams Sampling(uint64_t seed, int max_tokens = 300) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  return p;
}

class ConstrainedGenerationTest : public testing::StoriesFixture {
 protected:
  GenerationRequest Request(const std::string& prompt, SamplingParams p,
                            std::shared_ptr<const grammar::Grammar> g, int n = 1) {
    GenerationRequest r;
    r.prompt = model_->tokenizer().Encode(prompt, /*add_special=*/true);
    r.params = std::move(p);
    r.grammar = std::move(g);
    r.n = n;
    return r;
  }

  // Runs the requests together in one engine; completions in request order, then index.
  std::vector<Completion> Run(std::vector<GenerationRequest> reqs,
                              EngineConfig config = testing::SmallConfig(),
                              EngineStats* stats = nullptr) {
    auto e = Engine::Create(*model_, config, nullptr, /*quiet=*/true);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return {};
    for (GenerationRequest& r : reqs) {
      auto rid = (*e)->AddRequest(std::move(r));
      EXPECT_TRUE(rid.ok()) << rid.status();
    }
    auto done = testing::RunToEnd(**e);
    EXPECT_TRUE(done.ok()) << done.status();
    if (stats) *stats = (*e)->stats();
    std::vector<Completion> out;
    if (done.ok()) {
      for (auto& [key, c] : *done) out.push_back(std::move(c));
    }
    return out;
  }
};

TEST_F(ConstrainedGenerationTest, SchemaAnswersValidateAndUnconstrainedOnesDoNotParse) {
  const auto g = SchemaGrammar();
  ASSERT_NE(g, nullptr);
  std::vector<GenerationRequest> constrained, free;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    constrained.push_back(Request("Lily's friend, as JSON:", Sampling(seed), g));
    free.push_back(Request("Lily's friend, as JSON:", Sampling(seed), nullptr));
  }
  const std::vector<Completion> with = Run(std::move(constrained));
  const std::vector<Completion> without = Run(std::move(free));
  ASSERT_EQ(with.size(), 20u);
  ASSERT_EQ(without.size(), 20u);
  int valid = 0, parsed_free = 0;
  std::set<std::string> distinct;
  for (int i = 0; i < 20; ++i) {
    const std::string why = testing::TextViolation(with[i].text, kSchema);
    EXPECT_EQ(why, "") << "seed " << i + 1;
    EXPECT_EQ(with[i].reason, FinishReason::kStop) << with[i].text;
    valid += why.empty();
    distinct.insert(with[i].text);
    parsed_free += !json::parse(without[i].text, nullptr, false).is_discarded();
  }
  std::printf("constrained: %d of 20 valid (%zu distinct); unconstrained: %d of 20 parse\n", valid,
              distinct.size(), parsed_free);
  std::printf("e.g. %s\n", with[0].text.c_str());
  EXPECT_EQ(valid, 20);
  EXPECT_EQ(parsed_free, 0);
  EXPECT_GT(distinct.size(), 10u) << "the seeds should give different answers";
}

// Every sampler path chooses among the allowed tokens only.
TEST_F(ConstrainedGenerationTest, EverySamplerPathHonoursTheMask) {
  const auto g = Compile(R"(root ::= "The " ( "cat" | "dog" ) " is " [a-z]{1,8} ".")");
  ASSERT_NE(g, nullptr);
  // A strong bias towards a token the grammar never allows (" Once" after the prompt) must
  // not get it chosen.
  const int32_t once = model_->tokenizer().Encode("Once", false).back();
  std::vector<SamplingParams> paths;
  SamplingParams greedy = Sampling(1, 40);
  greedy.temperature = 0;
  paths.push_back(greedy);
  SamplingParams filtered = Sampling(2, 40);
  filtered.top_k = 5, filtered.top_p = 0.8f, filtered.min_p = 0.1f, filtered.temperature = 0.7f;
  paths.push_back(filtered);
  SamplingParams penalised = Sampling(3, 40);
  penalised.repetition_penalty = 1.3f, penalised.presence_penalty = 1.0f;
  penalised.frequency_penalty = 0.5f;
  paths.push_back(penalised);
  SamplingParams biased = Sampling(4, 40);
  biased.logit_bias = {{once, 100.0f}};
  paths.push_back(biased);
  SamplingParams biased_greedy = greedy;
  biased_greedy.logit_bias = {{once, 100.0f}};
  paths.push_back(biased_greedy);
  for (size_t i = 0; i < paths.size(); ++i) {
    std::vector<GenerationRequest> reqs;
    reqs.push_back(Request("Once upon a time", paths[i], g));
    const std::vector<Completion> out = Run(std::move(reqs));
    ASSERT_EQ(out.size(), 1u);
    const std::string& t = out[0].text;
    EXPECT_TRUE(t.rfind("The cat is ", 0) == 0 || t.rfind("The dog is ", 0) == 0)
        << "path " << i << ": " << t;
    EXPECT_EQ(t.back(), '.') << "path " << i << ": " << t;
    EXPECT_EQ(out[0].reason, FinishReason::kStop) << "path " << i;
    // The grammar allows nothing after "." : the sequence ends there, no end token added.
    EXPECT_FALSE(model_->tokenizer().IsEndOfGeneration(out[0].tokens.back())) << "path " << i;
  }
}

TEST_F(ConstrainedGenerationTest, StopStringsStillCutTheText) {
  const auto g = Compile(R"(root ::= "The cat is " [a-z ]{1,40} ".")");
  SamplingParams p = Sampling(5, 60);
  p.stop = {"cat"};
  std::vector<GenerationRequest> reqs;
  reqs.push_back(Request("Once upon a time", p, g));
  const std::vector<Completion> out = Run(std::move(reqs));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].text, "The ");
  EXPECT_EQ(out[0].reason, FinishReason::kStop);
}

TEST_F(ConstrainedGenerationTest, ForksEachFollowTheGrammarWithTheirOwnState) {
  const auto g = SchemaGrammar();
  std::vector<GenerationRequest> reqs;
  reqs.push_back(Request("Lily's friend, as JSON:", Sampling(7), g, /*n=*/4));
  const std::vector<Completion> out = Run(std::move(reqs));
  ASSERT_EQ(out.size(), 4u);
  std::set<std::string> distinct;
  for (const Completion& c : out) {
    EXPECT_EQ(testing::TextViolation(c.text, kSchema), "");
    distinct.insert(c.text);
  }
  EXPECT_GT(distinct.size(), 1u) << "the forks should differ";
}

// A pool too small for all of them at full length: sequences are preempted and recomputed,
// and each keeps its grammar state (the answers equal those of an engine with room).
TEST_F(ConstrainedGenerationTest, PreemptedSequencesKeepTheirGrammarState) {
  const auto g = SchemaGrammar();
  auto requests = [&] {
    std::vector<GenerationRequest> reqs;
    for (uint64_t seed = 11; seed <= 16; ++seed) {
      reqs.push_back(Request("Lily's friend, as JSON:", Sampling(seed, 250), g));
    }
    return reqs;
  };
  EngineStats roomy_stats, tight_stats;
  const std::vector<Completion> roomy = Run(requests(), testing::SmallConfig(), &roomy_stats);
  // 17 blocks of 16 tokens (stories260K's f32 K/V: 1,280 bytes a token): one sequence of
  // max_model_len fits, six growing ones do not.
  EngineConfig tight = testing::SmallConfig();
  tight.block_size = 16;
  tight.admission_headroom = 0;
  tight.kv_cache_memory = 17ull * 16 * 1280;
  tight.max_model_len = 272;
  const std::vector<Completion> tight_out = Run(requests(), tight, &tight_stats);
  EXPECT_EQ(roomy_stats.preemptions, 0);
  EXPECT_GT(tight_stats.preemptions, 0) << "the pool was meant to force preemptions";
  ASSERT_EQ(tight_out.size(), roomy.size());
  for (size_t i = 0; i < roomy.size(); ++i) {
    EXPECT_EQ(tight_out[i].text, roomy[i].text) << i;
    EXPECT_EQ(testing::TextViolation(tight_out[i].text, kSchema), "") << i;
  }
}

TEST_F(ConstrainedGenerationTest, PrefixCachedPromptsStillFollowTheGrammar) {
  const auto g = SchemaGrammar();
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside. Her "
      "friend, as JSON:";
  auto e = Engine::Create(*model_, testing::SmallConfig(), nullptr, /*quiet=*/true);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<Completion> out;
  for (uint64_t seed : {21, 22}) {
    ASSERT_TRUE((*e)->AddRequest(Request(prompt, Sampling(seed), g)).ok());
    auto done = testing::RunToEnd(**e);
    ASSERT_TRUE(done.ok()) << done.status();
    for (auto& [key, c] : *done) out.push_back(std::move(c));
  }
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].cached_prompt_tokens, 0);
  EXPECT_GT(out[1].cached_prompt_tokens, 0) << "the second request should hit the prefix cache";
  for (const Completion& c : out) EXPECT_EQ(testing::TextViolation(c.text, kSchema), "");
}

// ignore_eos: the end token is masked while the grammar can go on, and the sequence still
// ends where the grammar does.
TEST_F(ConstrainedGenerationTest, IgnoreEosRunsToTheGrammarsEnd) {
  const auto g = Compile(R"(root ::= "The cat" ( " is big" )? ".")");
  SamplingParams p = Sampling(9, 50);
  p.ignore_eos = true;
  std::vector<GenerationRequest> reqs;
  reqs.push_back(Request("Once upon a time", p, g));
  const std::vector<Completion> out = Run(std::move(reqs));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].text == "The cat." || out[0].text == "The cat is big.") << out[0].text;
  EXPECT_EQ(out[0].reason, FinishReason::kStop);
}

// Logprobs stay vLLM's raw logprobs: the log-softmax of the logits before the mask.
TEST_F(ConstrainedGenerationTest, LogprobsAreTheRawLogitsOnes) {
  const auto g = Compile(R"(root ::= "{" [a-z]{3} "}")");
  auto e = Engine::Create(*model_, testing::SmallConfig(), nullptr, /*quiet=*/true);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<std::vector<float>> raw;
  (*e)->SetLogitsObserver([&](int64_t, int, const float* l, int n) { raw.emplace_back(l, l + n); });
  SamplingParams p = Sampling(3, 20);
  p.logprobs = 2;
  ASSERT_TRUE((*e)->AddRequest(Request("Once upon a time", p, g)).ok());
  std::vector<SampledLogprobs> lps;
  std::vector<int32_t> tokens;
  while ((*e)->HasWork()) {
    auto step = (*e)->Step();
    ASSERT_TRUE(step.ok()) << step.status();
    for (const SequenceOutput& o : *step) {
      lps.insert(lps.end(), o.logprobs.begin(), o.logprobs.end());
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    }
  }
  ASSERT_EQ(lps.size(), tokens.size());
  ASSERT_EQ(raw.size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const SampledLogprobs want = ComputeLogprobs(raw[i].data(), (int)raw[i].size(), tokens[i], 2);
    EXPECT_EQ(lps[i].chosen.token, tokens[i]);
    EXPECT_NEAR(lps[i].chosen.logprob, want.chosen.logprob, 1e-5) << i;
    ASSERT_EQ(lps[i].top.size(), want.top.size());
    EXPECT_EQ(lps[i].top[0].token, want.top[0].token) << "top-1 of the raw logits, not masked";
  }
}

}  // namespace
}  // namespace pinfer
