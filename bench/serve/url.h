// The server a benchmark drives, from a base URL such as http://127.0.0.1:8080/v1 (vLLM's
// --base-url shape; the OpenAI paths /completions, /models go under it; llama.cpp-style
// /tokenize goes at the server's root).
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace pinfer::bench_serve {

struct BaseUrl {
  std::string host;  // a name or an address; [v6] brackets removed
  std::string port = "80";
  std::string path;  // "/v1" (no trailing slash; "" for the root)

  std::string Under(std::string_view sub) const { return path + std::string(sub); }
  std::string HostHeader() const;  // "host:port"
  std::string ToString() const;
};

// http:// only (InvalidArgument for https or anything malformed, saying so).
absl::StatusOr<BaseUrl> ParseBaseUrl(const std::string& url);

}  // namespace pinfer::bench_serve
