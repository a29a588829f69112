// Engine refusals name the request parameter they concern as data (ParamOf), which the
// server reports as OpenAI's error.param.
#include "engine/param_error.h"

#include "engine/engine.h"
#include "engine/model/model.h"
#include "engine/sampler.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_helpers.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

TEST(ParamError, CarriesTheParameter) {
  const absl::Status s = InvalidParamError("top_p", "top_p = 2 is out of range");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "top_p = 2 is out of range");
  EXPECT_EQ(ParamOf(s), "top_p");
  EXPECT_EQ(ParamOf(absl::InvalidArgumentError("max_tokens is mentioned, not named")), "");
  EXPECT_EQ(ParamOf(absl::OkStatus()), "");
}

TEST(ParamError, SamplingParamsNameTheField) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_EQ(ParamOf(p.Validate(100)), "temperature");
  p = SamplingParams();
  p.logit_bias = {{500, 1.0f}};
  EXPECT_EQ(ParamOf(p.Validate(100)), "logit_bias");
  p = SamplingParams();
  p.logprobs = 101;
  EXPECT_EQ(ParamOf(p.Validate(100)), "logprobs");
  EXPECT_TRUE(SamplingParams().Validate(100).ok());
}

TEST(ParamError, EngineValidateNamesTheField) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  EngineConfig cfg = testing::SmallConfig();
  cfg.max_model_len = 64;
  auto engine = Engine::Create(**model, cfg, nullptr, /*quiet=*/true);
  ASSERT_TRUE(engine.ok()) << engine.status();
  GenerationRequest req;
  req.prompt = {1, 2, 3};
  req.params.max_tokens = 8;
  EXPECT_TRUE((*engine)->Validate(req).ok());
  GenerationRequest too_long = req;
  too_long.params.max_tokens = 62;  // 3 + 62 > 64
  EXPECT_EQ(ParamOf((*engine)->Validate(too_long)), "max_tokens");
  GenerationRequest many = req;
  many.n = cfg.max_num_seqs + 1;
  EXPECT_EQ(ParamOf((*engine)->Validate(many)), "n");
  GenerationRequest bad_id = req;
  bad_id.prompt.push_back((*model)->config().n_vocab);
  EXPECT_EQ(ParamOf((*engine)->Validate(bad_id)), "prompt");
  GenerationRequest empty = req;
  empty.prompt.clear();
  EXPECT_EQ(ParamOf((*engine)->Validate(empty)), "prompt");
}

}  // namespace
}  // namespace pinfer
