// Sizes in bytes as people write them: "3.56 GiB" out, "16GiB" / "512MiB" / "1000000" in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer {

// "3.56 GiB", "512.00 KiB", "100 B" (binary units, two decimals from KiB up).
std::string FormatBytes(uint64_t bytes);

// Parses "16GiB", "512MiB", "4G", "1.5GB", "1000000" into bytes: KiB/MiB/GiB/TiB and K/M/G/T
// are binary, KB/MB/GB/TB decimal, B or no suffix bytes. InvalidArgument otherwise.
absl::StatusOr<uint64_t> ParseBytes(std::string_view text);

}  // namespace pinfer
