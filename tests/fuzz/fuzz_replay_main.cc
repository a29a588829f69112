// A main() for a fuzz target built without libFuzzer (any compiler): runs
// LLVMFuzzerTestOneInput once on every file named on the command line, and on every file of
// every folder named (sorted, not recursive). CTest runs each target this way on its seed
// corpus and on the inputs that once crashed it (tests/fuzz/regressions/<target>/), so those
// inputs stay tests in every build, sanitized or not. Exit 0 when every input returned;
// 1 when a path cannot be read or no input was found (a misnamed folder is not a pass).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  std::fprintf(stderr, "fuzz replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path p(argv[a]);
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      if (!RunFile(p)) return 1;
      ++inputs;
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    if (ec) {
      std::fprintf(stderr, "fuzz replay: cannot list %s: %s\n", p.c_str(), ec.message().c_str());
      return 1;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      if (!RunFile(f)) return 1;
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "fuzz replay: no inputs found in the paths given\n");
    return 1;
  }
  std::fprintf(stderr, "fuzz replay: %d inputs, all returned\n", inputs);
  return 0;
}
