#include "server/openai_request.h"

#include <cmath>
#include <set>

#include "loaders/json_strict.h"
#include "nlohmann/json.hpp"

namespace pinfer::server {
namespace {

using json = nlohmann::json;

ApiError Bad(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

std::optional<ApiError> GetNumber(const json& body, const char* key, double lo, double hi,
                                  float* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number()) return Bad(key, std::string(key) + " must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Bad(key, std::string(key) + " = " + v.dump() + " is out of range (" + json(lo).dump() +
                        ".." + json(hi).dump() + ")");
  }
  *out = static_cast<float>(d);
  return std::nullopt;
}

std::optional<ApiError> GetInt(const json& body, const char* key, int64_t lo, int64_t hi,
                               int64_t* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number_integer()) return Bad(key, std::string(key) + " must be an integer");
  const int64_t i = v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)INT64_MAX
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (i < lo || i > hi) {
    return Bad(key, std::string(key) + " = " + v.dump() + " is out of range (" +
                        std::to_string(lo) + ".." + std::to_string(hi) + ")");
  }
  *out = i;
  return std::nullopt;
}

// A boolean field: absent or null leaves *out.
std::optional<ApiError> GetBool(const json& body, const char* key, bool* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_boolean()) return Bad(key, std::string(key) + " must be true or false");
  *out = body[key].get<bool>();
  return std::nullopt;
}

// Parameters OpenAI defines that this server accepts only at their neutral value.
bool IsNeutral(const json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
         (v.is_number() && v.get<double>() == 0) || (v.is_object() && v.empty()) ||
         (v.is_array() && v.empty());
}

std::optional<ApiError> ParseMessages(const json& v, std::vector<ChatMessage>* out) {
  if (!v.is_array() || v.empty()) {
    return Bad("messages", "messages must be a non-empty array of {role, content}");
  }
  for (const json& m : v) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Bad("messages", "each message needs a string role");
    }
    ChatMessage msg;
    msg.role = m["role"].get<std::string>();
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant") {
      return Bad("messages", "role '" + msg.role + "' is not supported (system, user, assistant)");
    }
    const json& c = m.contains("content") ? m["content"] : json();
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {  // [{"type": "text", "text": "..."}]
      for (const json& part : c) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return Bad("messages", "only text content parts are supported");
        }
        msg.content += part["text"].get<std::string>();
      }
    } else if (!c.is_null()) {
      return Bad("messages", "content must be a string or an array of text parts");
    }
    out->push_back(std::move(msg));
  }
  return std::nullopt;
}

std::optional<ApiError> ParsePrompt(const json& v, ParsedRequest* out) {
  if (v.is_string()) {
    out->prompt = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && v.size() == 1 && v[0].is_string()) {
    out->prompt = v[0].get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    for (const json& t : v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        return Bad("prompt", "a token-id prompt must hold non-negative integers");
      }
      out->prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return std::nullopt;
  }
  return Bad("prompt", "prompt must be a string or an array of token ids (one prompt per request)");
}

// The request's fields: unknown ones, and OpenAI's that this server takes only at their
// neutral value, are errors naming the field.
std::optional<ApiError> CheckFields(const json& j) {
  static const std::set<std::string> kKnown = {"model",
                                               "prompt",
                                               "messages",
                                               "max_tokens",
                                               "max_completion_tokens",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "seed",
                                               "stop",
                                               "n",
                                               "stream",
                                               "stream_options",
                                               "user",
                                               "repetition_penalty",
                                               "ignore_eos",
                                               "presence_penalty",
                                               "frequency_penalty",
                                               "logit_bias",
                                               "logprobs",
                                               "top_logprobs",
                                               "echo",
                                               "suffix",
                                               "best_of"};
  static const std::set<std::string> kNeutralOnly = {"presence_penalty",
                                                     "frequency_penalty",
                                                     "logit_bias",
                                                     "logprobs",
                                                     "top_logprobs",
                                                     "echo",
                                                     "suffix"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kKnown.count(it.key())) return Bad(it.key(), "unknown parameter '" + it.key() + "'");
    if (kNeutralOnly.count(it.key()) && !IsNeutral(it.value())) {
      return Bad(it.key(), "parameter '" + it.key() + "' is not supported by this server");
    }
  }
  return std::nullopt;
}

// OpenAI's defaults: plain sampling at temperature 1, no top-k / top-p / min-p filtering.
ParsedRequest Defaults(bool chat) {
  ParsedRequest r;
  r.chat = chat;
  r.params.temperature = 1.0f;
  r.params.top_p = 1.0f;
  r.params.top_k = 0;
  r.params.min_p = 0.0f;
  r.params.max_tokens = 16;
  return r;
}

// model, and the prompt (completions) or the messages (chat).
std::optional<ApiError> ParseInput(const json& j, ParsedRequest* r) {
  if (j.contains("model") && !j["model"].is_null()) {
    if (!j["model"].is_string()) return Bad("model", "model must be a string");
    r->model = j["model"].get<std::string>();
  }
  if (r->chat) {
    if (j.contains("prompt")) return Bad("prompt", "chat completions take messages, not prompt");
    if (!j.contains("messages")) return Bad("messages", "messages is required");
    return ParseMessages(j["messages"], &r->messages);
  }
  if (j.contains("messages")) return Bad("messages", "completions take prompt, not messages");
  if (!j.contains("prompt")) return Bad("prompt", "prompt is required");
  return ParsePrompt(j["prompt"], r);
}

// max_tokens / max_completion_tokens, n and best_of.
std::optional<ApiError> ParseLengths(const json& j, ParsedRequest* r) {
  int64_t i = 0;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    i = -1;
    if (auto e = GetInt(j, key, 1, 1 << 30, &i)) return e;
    if (i >= 0) r->params.max_tokens = static_cast<int>(i), r->max_tokens_given = true;
  }
  i = 1;
  if (auto e = GetInt(j, "n", 1, 128, &i)) return e;
  r->n = static_cast<int>(i);
  if (j.contains("best_of") && !j["best_of"].is_null() && j["best_of"] != json(r->n) &&
      j["best_of"] != json(1)) {
    return Bad("best_of", "best_of other than n is not supported");
  }
  return std::nullopt;
}

// temperature, top_p, min_p, top_k, repetition_penalty, seed, ignore_eos.
std::optional<ApiError> ParseSampling(const json& j, SamplingParams* p) {
  if (auto e = GetNumber(j, "temperature", 0, 2, &p->temperature)) return e;
  if (auto e = GetNumber(j, "top_p", 0, 1, &p->top_p)) return e;
  if (p->top_p <= 0) return Bad("top_p", "top_p must be greater than 0");
  if (auto e = GetNumber(j, "min_p", 0, 1, &p->min_p)) return e;
  if (auto e = GetNumber(j, "repetition_penalty", 0.01, 10, &p->repetition_penalty)) return e;
  int64_t i = 0;
  if (auto e = GetInt(j, "top_k", 0, 1 << 30, &i)) return e;
  p->top_k = static_cast<int>(i);
  if (j.contains("seed") && !j["seed"].is_null()) {  // none: the engine draws one
    if (auto e = GetInt(j, "seed", INT64_MIN, INT64_MAX, &i)) return e;
    p->seed = static_cast<uint64_t>(i);
  }
  if (auto e = GetBool(j, "ignore_eos", &p->ignore_eos)) return e;
  return std::nullopt;
}

// stream and stream_options.include_usage.
std::optional<ApiError> ParseStreaming(const json& j, ParsedRequest* r) {
  if (auto e = GetBool(j, "stream", &r->stream)) return e;
  if (!j.contains("stream_options") || j["stream_options"].is_null()) return std::nullopt;
  const json& so = j["stream_options"];
  if (!so.is_object()) return Bad("stream_options", "stream_options must be an object");
  for (auto it = so.begin(); it != so.end(); ++it) {
    if (it.key() != "include_usage" || !it.value().is_boolean()) {
      return Bad("stream_options", "stream_options takes only include_usage (a boolean)");
    }
    r->include_usage = it.value().get<bool>();
  }
  return std::nullopt;
}

// stop: a string or up to 16 non-empty strings.
std::optional<ApiError> ParseStop(const json& j, SamplingParams* p) {
  if (!j.contains("stop") || j["stop"].is_null()) return std::nullopt;
  const json& s = j["stop"];
  if (s.is_string()) {
    p->stop.push_back(s.get<std::string>());
  } else if (s.is_array() && s.size() <= 16) {
    for (const json& x : s) {
      if (!x.is_string()) return Bad("stop", "stop must be a string or an array of strings");
      p->stop.push_back(x.get<std::string>());
    }
  } else {
    return Bad("stop", "stop must be a string or an array of at most 16 strings");
  }
  for (const std::string& st : p->stop) {
    if (st.empty()) return Bad("stop", "stop strings must not be empty");
  }
  return std::nullopt;
}

// The steps as ParseRequest runs them, each over the whole body and the request so far.
std::optional<ApiError> CheckFieldsStep(const json& j, ParsedRequest*) { return CheckFields(j); }
std::optional<ApiError> ParseSamplingStep(const json& j, ParsedRequest* r) {
  return ParseSampling(j, &r->params);
}
std::optional<ApiError> ParseStopStep(const json& j, ParsedRequest* r) {
  return ParseStop(j, &r->params);
}

}  // namespace

std::string ErrorJson(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json() : json(e.param)},
              {"code", e.code.empty() ? json() : json(e.code)}};
  return json{{"error", err}}.dump();
}

ApiError ErrorFromStatus(const absl::Status& s) {
  ApiError e;
  e.message = std::string(s.message());
  if (absl::IsInvalidArgument(s)) return e;
  if (absl::IsResourceExhausted(s)) {
    e.http_status = 503;
    e.type = "server_overloaded";
    e.code = "queue_full";
    return e;
  }
  if (absl::IsUnavailable(s)) {  // the server is shutting down
    e.http_status = 503;
    e.type = "server_unavailable";
    e.code = "shutting_down";
    return e;
  }
  e.http_status = 500;
  e.type = "server_error";
  return e;
}

std::optional<ApiError> ParseRequest(const std::string& body, bool chat, ParsedRequest* out) {
  // Nesting is bounded before anything is built (no walk of the body can then go deep);
  // the size is bounded by the HTTP layer's --max-body.
  if (absl::Status s = CheckJsonLimits(body, "the request body", kRequestJsonLimits); !s.ok()) {
    return Bad("", std::string(s.message()));
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("", "the request body is not valid JSON");
  if (!j.is_object()) return Bad("", "the request body must be a JSON object");
  ParsedRequest r = Defaults(chat);
  for (auto step : {CheckFieldsStep, ParseInput, ParseLengths, ParseSamplingStep, ParseStreaming,
                    ParseStopStep}) {
    if (auto e = step(j, &r)) return e;
  }
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace pinfer::server
