#include "examples/pagedinfer/read_text.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace pinfer::cli {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot open text file '", path, "'; give an existing file with -f FILE"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace pinfer::cli
