#include "bench/serve/server_api.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/serve/client.h"
#include "bench/serve/events.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

using json = nlohmann::json;

std::string RootPath(const BaseUrl& url) {
  std::string p = url.path;
  if (absl::EndsWith(p, "/v1")) p.resize(p.size() - 3);
  return p;
}

}  // namespace

absl::StatusOr<std::string> FirstModelId(const BaseUrl& url, const std::string& api_key) {
  auto reply = HttpCall(url, url.Under("/models"), "", api_key);
  if (!reply.ok()) return reply.status();
  if (reply->status != 200) {
    return absl::FailedPreconditionError(absl::StrCat("GET ", url.Under("/models"), ": ",
                                                      HttpErrorText(reply->status, reply->body)));
  }
  json j = json::parse(reply->body, nullptr, false);
  if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
      j["data"][0].is_object() && j["data"][0].contains("id") && j["data"][0]["id"].is_string()) {
    return j["data"][0]["id"].get<std::string>();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("GET ", url.Under("/models"), " lists no model id; pass --model"));
}

absl::Status WaitUntilReady(const BaseUrl& url, const std::string& api_key, double timeout_s,
                            double poll_s) {
  using Clock = std::chrono::steady_clock;
  const std::string target = url.Under("/models");
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, timeout_s)));
  std::string last;
  while (true) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    auto reply = HttpCall(url, target, "", api_key, std::clamp(left, 0.1, 10.0));
    if (reply.ok() && reply->status == 200) return absl::OkStatus();
    if (reply.ok() && (reply->status == 401 || reply->status == 403 || reply->status == 404)) {
      return absl::FailedPreconditionError(
          absl::StrCat("GET ", target, ": ", HttpErrorText(reply->status, reply->body)));
    }
    last = reply.ok() ? HttpErrorText(reply->status, reply->body)
                      : std::string(reply.status().message());
    if (Clock::now() + std::chrono::duration<double>(poll_s) >= deadline) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
  return absl::DeadlineExceededError(absl::StrCat("the server at ", url.ToString(),
                                                  " was not ready within ", timeout_s, " s (GET ",
                                                  target, ": ", last, ")"));
}

absl::StatusOr<std::vector<int32_t>> ParseTokenizeReply(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array()) {
    return absl::InternalError("/tokenize answered without a \"tokens\" array");
  }
  std::vector<int32_t> ids;
  for (const json& t : j["tokens"]) {
    const json& id = t.is_object() && t.contains("id") ? t["id"] : t;
    if (!id.is_number_integer()) return absl::InternalError("/tokenize gave a non-integer token");
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

TokenizeFn ServerTokenizer(const BaseUrl& url, const std::string& api_key) {
  const std::string target = RootPath(url) + "/tokenize";
  return [url, api_key, target](const std::string& text,
                                bool add_special) -> absl::StatusOr<std::vector<int32_t>> {
    json body = {{"content", text}, {"add_special", add_special}};
    auto reply = HttpCall(url, target, body.dump(), api_key);
    if (!reply.ok()) return reply.status();
    if (reply->status == 404) {
      return absl::NotFoundError(absl::StrCat("the server has no ", target, " endpoint"));
    }
    if (reply->status != 200) {
      return absl::FailedPreconditionError(
          absl::StrCat("POST ", target, ": ", HttpErrorText(reply->status, reply->body)));
    }
    return ParseTokenizeReply(reply->body);
  };
}

}  // namespace pinfer::bench_serve
