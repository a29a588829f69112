// `pagedinfer bench`'s tests at a context depth (llama-bench's -d) on stories260K: names,
// counts and that every repetition found the depth in the prefix cache (RunSpeedBench fails
// otherwise); depths that are not whole blocks are refused.
#include "bench/speed.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

SpeedOptions Small(int depth) {
  SpeedOptions o;
  o.n_prompt = 8;
  o.n_gen = 4;
  o.repetitions = 2;
  o.n_depth = depth;
  o.engine.threads = 1;
  return o;
}

TEST(SpeedBench, RunsAtAContextDepthServedByThePrefixCache) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto r = RunSpeedBench(**model, Small(96));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tests.size(), 2u);
  EXPECT_EQ(r->tests[0].name, "pp8 @ d96");
  EXPECT_EQ(r->tests[1].name, "tg4 @ d96");
  for (const SpeedTest& t : r->tests) {
    EXPECT_EQ(t.n_depth, 96);
    EXPECT_EQ(t.samples_ts.size(), 2u);
    EXPECT_GT(t.mean_ts, 0);
  }
  // tg reads the weights and the KV of depth + the mean of its own tokens.
  EXPECT_EQ(r->tests[1].bytes_per_token,
            r->model.decode_weight_bytes + r->model.kv_bytes_per_token * (2 * 96 + 5) / 2);
  EXPECT_THAT(SpeedJson(*r), ::testing::HasSubstr("\"n_depth\": 96"));
  EXPECT_THAT(SpeedJson(*r), ::testing::HasSubstr("\"read_gbps\""));
  EXPECT_THAT(SpeedMarkdown(*r), ::testing::HasSubstr("% of the read bandwidth"));
}

TEST(SpeedBench, WithoutDepthTheNamesAreLlamaBenchs) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto r = RunSpeedBench(**model, Small(0));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tests.size(), 2u);
  EXPECT_EQ(r->tests[0].name, "pp8");
  EXPECT_EQ(r->tests[1].name, "tg4");
}

// The read benchmark checks its own sums (it returns 0 when a pass read wrong or dropped
// words), so a positive figure means every word of every pass was read; no time is asserted.
TEST(SpeedBench, ReadBandwidthReadsEveryWord) {
  EXPECT_GT(MeasureReadBandwidth(2, (4u << 20) + 24, 2), 0.0);  // a partial last chunk too
  EXPECT_GT(MeasureReadBandwidth(1, 8, 1), 0.0);
}

TEST(SpeedBench, RefusesADepthThatIsNotWholeBlocks) {
  PINFER_REQUIRE_MODEL(path, "stories260K.gguf");
  auto model = Model::Load(path);
  ASSERT_TRUE(model.ok()) << model.status();
  for (int d : {10, -16}) {
    auto r = RunSpeedBench(**model, Small(d));
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("multiple of the KV block size"));
  }
}

}  // namespace
}  // namespace pinfer
