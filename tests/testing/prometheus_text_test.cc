// The test parser of the Prometheus text format refuses what the format forbids, so a
// /metrics page it accepts is well formed.
#include "tests/testing/prometheus_text.h"

#include <gtest/gtest.h>

namespace pinfer::testing {
namespace {

bool Parses(const std::string& text) {
  std::map<std::string, PromFamily> f;
  std::string error;
  return ParsePrometheusText(text, &f, &error);
}

const char kGood[] =
    "# HELP a:b A gauge.\n# TYPE a:b gauge\na:b{model_name=\"m\\\"x\"} 1.5\n"
    "# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.3\nh_count 2\n";

TEST(PrometheusTextTest, AcceptsAWellFormedPage) {
  std::map<std::string, PromFamily> f;
  std::string error;
  ASSERT_TRUE(ParsePrometheusText(kGood, &f, &error)) << error;
  EXPECT_EQ(f["a:b"].samples[0].labels["model_name"], "m\"x");
  EXPECT_EQ(f["h"].samples.size(), 4u);
}

TEST(PrometheusTextTest, RefusesWhatTheFormatForbids) {
  EXPECT_FALSE(Parses("x 1\n"));                                       // no TYPE
  EXPECT_FALSE(Parses("# TYPE x gauge\n# TYPE x gauge\nx 1\n"));       // TYPE twice
  EXPECT_FALSE(Parses("# TYPE x gauge\nx{1a=\"v\"} 1\n"));             // label name
  EXPECT_FALSE(Parses("# TYPE x gauge\nx{a=v} 1\n"));                  // unquoted value
  EXPECT_FALSE(Parses("# TYPE x gauge\nx one\n"));                     // value
  EXPECT_FALSE(Parses("# TYPE x wobble\nx 1\n"));                      // type
  EXPECT_FALSE(Parses("# TYPE x gauge\n# TYPE y gauge\ny 1\nx 1\n"));  // family split
  EXPECT_FALSE(
      Parses("# TYPE h histogram\nh_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\n"
             "h_sum 1\nh_count 2\n"));  // not cumulative
  EXPECT_FALSE(Parses("# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 3\n"));
  EXPECT_FALSE(Parses("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_sum 1\nh_count 2\n"));
}

}  // namespace
}  // namespace pinfer::testing
