#include "loaders/byte_size.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "loaders/absl_compat.h"

namespace pinfer {

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (v >= 1024.0 && unit < 3) {
    v /= 1024.0;
    ++unit;
  }
  return absl::StrFormat("%.2f %s", v, kUnits[unit]);
}

absl::StatusOr<uint64_t> ParseBytes(std::string_view text) {
  absl::string_view t = Sv(text);
  double mult = 1;
  struct Suffix {
    const char* s;
    double m;
  };
  static constexpr Suffix kSuffixes[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"K", 1024.0},   {"M", 1048576.0},   {"G", 1073741824.0},   {"T", 1099511627776.0},
      {"B", 1.0}};
  for (const Suffix& s : kSuffixes) {
    if (absl::ConsumeSuffix(&t, s.s)) {
      mult = s.m;
      break;
    }
  }
  double v;
  if (!absl::SimpleAtod(t, &v) || v < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", Sv(text), "' is not a size (examples: 16GiB, 512MiB, 1000000)"));
  }
  return static_cast<uint64_t>(v * mult);
}

}  // namespace pinfer
