// Where tests find the real models of ../shared/models/ (see its README.md).
#pragma once

#include <string>

namespace pinfer::testing {

// The models folder: $PAGEDINFER_MODELS if set, else ../shared/models beside the checkout.
std::string ModelsDir();

// Full path of a file under the models folder, or "" when the folder or file is absent.
std::string ModelPath(const std::string& relative);

// Full path of a file of the source tree (data/stories.txt, ...): the checkout this build was
// configured from.
std::string SourcePath(const std::string& relative);

// A fresh, empty temporary directory for one test (removed by the OS's tmp cleaning).
std::string TempDir(const std::string& tag);

// The whole content of a file ("" when it cannot be read): logs, /proc and cgroup files.
std::string ReadTextFile(const std::string& path);

}  // namespace pinfer::testing

// Skips the current test, naming the folder, when a shared model file is absent.
#define PINFER_REQUIRE_MODEL(var, relative)                                                      \
  std::string var = ::pinfer::testing::ModelPath(relative);                                      \
  if (var.empty()) {                                                                             \
    GTEST_SKIP() << "model " << (relative) << " not found under "                                \
                 << ::pinfer::testing::ModelsDir()                                               \
                 << " (the ../shared/models folder beside the checkout, or $PAGEDINFER_MODELS)"; \
  }
