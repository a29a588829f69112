#include "server/auth.h"

#include <cstdint>

namespace pinfer::server {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is read; differences accumulate with OR, without a
  // branch on the data. volatile keeps the compiler from ending the loop early.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    const uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff = diff | static_cast<uint8_t>(x ^ y);
  }
  return diff == 0;
}

bool BearerMatches(const std::string_view* header, std::string_view key) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header == nullptr || header->size() < kBearer.size() ||
      header->substr(0, kBearer.size()) != kBearer) {
    return false;
  }
  return ConstantTimeEquals(header->substr(kBearer.size()), key);
}

}  // namespace pinfer::server
