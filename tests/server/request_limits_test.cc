// Request bodies nested deeper than the limit are a clear 400, found by a linear scan before
// anything is parsed (a body of 100,000 nested arrays fits in the 1 MiB body limit).
#include <gtest/gtest.h>

#include <string>

#include "server/openai_request.h"

namespace pinfer::server {
namespace {

TEST(RequestLimitsTest, DeeplyNestedBodiesAreRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& body :
       {"{\"prompt\": \"x\", \"metadata\": " + deep + "}", deep,
        "{\"messages\": [{\"role\": \"user\", \"content\": " + deep + "}]}"}) {
    ParsedRequest r;
    auto e = ParseRequest(body, body.find("messages") != std::string::npos, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->http_status, 400);
    EXPECT_NE(e->message.find("nested more than 64 levels"), std::string::npos) << e->message;
  }
  ParsedRequest r;
  EXPECT_FALSE(ParseRequest(R"({"prompt": "x", "stop": ["[[[[{{{{"]})", false, &r).has_value());
}

}  // namespace
}  // namespace pinfer::server
