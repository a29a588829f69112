#include "bench/serve/events.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace pinfer::bench_serve {
namespace {

using json = nlohmann::json;

std::string Shorten(std::string_view s, size_t n = 200) {
  std::string out(s.substr(0, n));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (s.size() > n) out += "...";
  return out;
}

// The message of {"error": {"message": M}} or {"error": M}; "" when j has no error.
std::string ErrorMessage(const json& j) {
  if (!j.is_object() || !j.contains("error")) return "";
  const json& e = j["error"];
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("message") && e["message"].is_string()) {
    std::string m = e["message"].get<std::string>();
    if (e.contains("type") && e["type"].is_string()) {
      m += absl::StrCat(" (", e["type"].get<std::string>(), ")");
    }
    return m;
  }
  return Shorten(e.dump());
}

}  // namespace

bool StreamAccumulator::OnEvent(std::string_view data, double t_s) {
  if (failed_ || done_) return !failed_;
  if (data == "[DONE]") {
    done_ = true;
    return true;
  }
  json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    failed_ = true;
    r_->error = "a stream event is not JSON: " + Shorten(data);
    return false;
  }
  if (std::string m = ErrorMessage(j); !m.empty()) {
    failed_ = true;
    r_->error = "error event mid-stream: " + m;
    return false;
  }
  if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
    const json& c = j["choices"][0];
    const json* text = nullptr;
    if (chat_ && c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content")) {
      text = &c["delta"]["content"];
    } else if (!chat_ && c.contains("text")) {
      text = &c["text"];
    }
    if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
      if (r_->chunks == 0) {
        r_->ttft_s = t_s;
      } else {
        r_->itl_s.push_back(t_s - last_t_);
      }
      last_t_ = t_s;
      ++r_->chunks;
    }
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const json& u = j["usage"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer()) {
      r_->output_tokens = u["completion_tokens"].get<int>();
      r_->usage_seen = true;
    }
  }
  return true;
}

void StreamAccumulator::Finish(double t_s, const std::string& transport_error) {
  r_->latency_s = t_s;
  if (!r_->usage_seen) r_->output_tokens = r_->chunks;
  if (failed_) {
    r_->success = false;
    return;
  }
  if (!transport_error.empty()) {
    r_->error = absl::StrCat("the stream broke after ", r_->chunks, " chunks: ", transport_error);
  } else if (!done_) {
    r_->error = absl::StrCat("the stream ended after ", r_->chunks, " chunks without [DONE]");
  } else if (r_->chunks == 0) {
    r_->error = "the stream ended with no text";
  }
  r_->success = r_->error.empty();
}

std::string HttpErrorText(int status, std::string_view body) {
  std::string m;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) m = ErrorMessage(j);
  if (m.empty()) m = Shorten(body);
  return absl::StrCat("HTTP ", status, m.empty() ? "" : ": ", m);
}

}  // namespace pinfer::bench_serve
