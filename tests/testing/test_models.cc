#include "tests/testing/test_models.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace pinfer::testing {

std::string ModelsDir() {
  if (const char* env = std::getenv("PAGEDINFER_MODELS"); env != nullptr && *env != '\0') {
    return env;
  }
  return PAGEDINFER_MODELS_DIR;
}

std::string ModelPath(const std::string& relative) {
  std::filesystem::path p = std::filesystem::path(ModelsDir()) / relative;
  std::error_code ec;
  return std::filesystem::exists(p, ec) ? p.string() : std::string();
}

std::string SourcePath(const std::string& relative) {
  return (std::filesystem::path(PAGEDINFER_SOURCE_DIR) / relative).string();
}

std::string TempDir(const std::string& tag) {
  std::random_device rd;
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("pagedinfer-" + tag + "-" + std::to_string(rd()));
  std::filesystem::create_directories(p);
  return p.string();
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pinfer::testing
