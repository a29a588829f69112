// Model folders whose JSON files are nested 100,000 deep (config.json, tokenizer.json,
// tokenizer_config.json) are refused with a message, by Model::Load and by `pagedinfer
// inspect`, instead of overflowing the stack.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/model/model.h"
#include "tests/testing/hf_folders.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

using ::testing::HasSubstr;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A valid tiny folder with one JSON file given an extra member nested 100,000 deep.
std::string DeepFolder(const std::string& file) {
  const ModelConfig c = testing::TinyHfConfig();
  const std::string dir = testing::TempDir("hf-deep-" + file);
  EXPECT_TRUE(testing::WriteFloatFolder(dir, c, testing::RandomTinyWeights(c, 1)).ok());
  const std::string path = dir + "/" + file;
  std::string text = ReadAll(path);
  if (text.empty()) text = "{}";
  const size_t brace = text.find('{');
  text.insert(brace + 1, "\"deep\": " + Nested(100000) + (text.size() > brace + 2 ? "," : ""));
  EXPECT_TRUE(testing::WriteFile(path, text).ok());
  return dir;
}

TEST(HfJsonLimitsTest, DeeplyNestedJsonFilesAreRefusedWithAMessage) {
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    const std::string dir = DeepFolder(file);
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Load(dir);
    ASSERT_FALSE(m.ok()) << file << " was accepted";
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("nested more than 64 levels")) << file;
  }
}

TEST(HfJsonLimitsTest, InspectExitsWithAnErrorNotACrash) {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  if (bin == nullptr) GTEST_SKIP() << "PAGEDINFER_BIN is not set (ctest sets it)";
  if (access(bin, X_OK) != 0) GTEST_SKIP() << bin << " is not built (sanitizer builds leave it out)";
  const std::string dir = DeepFolder("config.json");
  const std::string log = dir + "/inspect.log";
  const int status = std::system((std::string(bin) + " inspect " + dir + " 2>" + log).c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "inspect was killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(ReadAll(log), HasSubstr("nested more than 64 levels"));
}

}  // namespace
}  // namespace pinfer
