#include "bench/serve/url.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace pinfer::bench_serve {

std::string BaseUrl::HostHeader() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

std::string BaseUrl::ToString() const { return absl::StrCat("http://", HostHeader(), path); }

absl::StatusOr<BaseUrl> ParseBaseUrl(const std::string& url) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--url '", url, "': ", why, " (expected e.g. http://127.0.0.1:8080/v1)"));
  };
  if (absl::StartsWithIgnoreCase(url, "https://")) {
    return bad("https is not supported; use the server's plain http address");
  }
  if (!absl::StartsWithIgnoreCase(url, "http://")) return bad("it must start with http://");
  absl::string_view rest = absl::string_view(url).substr(7);
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  BaseUrl u;
  if (slash != absl::string_view::npos) u.path = std::string(rest.substr(slash));
  while (!u.path.empty() && u.path.back() == '/') u.path.pop_back();
  if (u.path.find_first_of("?# ") != std::string::npos) {
    return bad("the path may not hold a query, fragment or space");
  }
  if (authority.find('@') != absl::string_view::npos) return bad("user info is not supported");
  absl::string_view port;
  if (!authority.empty() && authority[0] == '[') {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return bad("an unclosed [ in the host");
    u.host = std::string(authority.substr(1, close - 1));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("text after the ] of the host");
      port = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return bad("no host");
  if (!port.empty()) {
    int p = 0;
    if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535) return bad("the port must be 1..65535");
    u.port = std::to_string(p);
  }
  return u;
}

}  // namespace pinfer::bench_serve
