// JSON size and nesting limits: a document nested 100,000 deep is refused by a linear scan
// (no stack), brackets inside strings do not count, and files over the size limit are
// refused before they are read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "loaders/json_strict.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonLimitsTest, DeepNestingIsRefusedWithoutRecursion) {
  for (int depth : {65, 1000, 100000, 10'000'000}) {
    absl::StatusOr<nlohmann::json> j =
        ParseJsonStrict(absl::StrCat("{\"k\": ", Nested(depth), "}"), "cfg");
    ASSERT_FALSE(j.ok()) << depth;
    EXPECT_THAT(std::string(j.status().message()), HasSubstr("nested more than 64 levels"));
  }
  EXPECT_TRUE(ParseJsonStrict(Nested(64), "cfg").ok());
  EXPECT_FALSE(ParseJsonStrict(absl::StrCat("[", Nested(64), "]"), "cfg").ok());
}

TEST(JsonLimitsTest, BracketsInsideStringsDoNotCount) {
  std::string deep_text = "\"";
  deep_text.append(1000, '[');
  deep_text.append("\\\"");
  deep_text.append(1000, '{');
  deep_text.append("\"");
  absl::StatusOr<nlohmann::json> j =
      ParseJsonStrict(absl::StrCat("{\"k\": ", deep_text, "}"), "cfg");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["k"].get<std::string>().size(), 2001u);
}

TEST(JsonLimitsTest, SizeLimitAndDuplicateKeys) {
  JsonLimits small;
  small.max_bytes = 10;
  EXPECT_THAT(std::string(ParseJson("[1,2,3,4,5,6]", "x", small).status().message()),
              HasSubstr("13 bytes of JSON; at most 10"));
  EXPECT_THAT(std::string(ParseJsonStrict("{\"a\":1,\"a\":2}", "x").status().message()),
              HasSubstr("duplicate JSON key 'a'"));
  JsonLimits lenient;
  lenient.refuse_duplicate_keys = false;
  absl::StatusOr<nlohmann::json> j = ParseJson("{\"a\":1,\"a\":2}", "x", lenient);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"], 2);
}

TEST(JsonLimitsTest, OversizedFilesAreRefusedBeforeReading) {
  const std::string path = testing::TempDir("json-limits") + "/big.json";
  {
    std::ofstream out(path);
    out << "[" << std::string(2000, ' ') << "]";
  }
  JsonLimits l;
  l.max_bytes = 1000;
  absl::StatusOr<nlohmann::json> j = ReadJsonFile(path, l);
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(std::string(j.status().message()), HasSubstr("2002 bytes of JSON; at most 1000"));
  EXPECT_TRUE(ReadJsonFile(path).ok());
}

}  // namespace
}  // namespace pinfer
