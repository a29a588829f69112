// API-key checks: "Authorization: Bearer KEY" compared in constant time, so the time an
// answer takes says nothing about how much of a guessed key was right.
#pragma once

#include <string_view>

namespace pinfer::server {

// True when a and b hold the same bytes. Its running time depends on the lengths only,
// never on where (or whether) the bytes differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The Authorization header value `header` (nullopt: absent) carries `key` as a bearer token.
bool BearerMatches(const std::string_view* header, std::string_view key);

}  // namespace pinfer::server
