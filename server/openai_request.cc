#include "server/openai_request.h"

#include <algorithm>
#include <set>

#include "engine/param_error.h"
#include "loaders/json_strict.h"
#include "nlohmann/json.hpp"
#include "server/request_grammar.h"
#include "server/request_json.h"
#include "server/request_sampling.h"
#include "server/request_tools.h"

namespace pinfer::server {
namespace {

using json = request_json::json;
using request_json::Bad;
using request_json::GetBool;
using request_json::GetInt;
using request_json::Has;

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
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" &&
        msg.role != "tool") {
      return Bad("messages",
                 "role '" + msg.role + "' is not supported (system, user, assistant, tool)");
    }
    if (auto e = ParseMessageToolParts(m, &msg)) return e;
    const json& c = m.contains("content") ? m["content"] : json();
    msg.content_null = c.is_null();
    if (c.is_string()) {
      msg.content = c.get<std::string>();
    } else if (c.is_array()) {  // [{"type": "text", "text": "..."}]
      for (const json& part : c) {
        const std::string type =
            part.is_object() && part.contains("type") && part["type"].is_string()
                ? part["type"].get<std::string>()
                : "";
        if (type != "text") {
          return Bad("messages", "content part type '" + type +
                                     "' is not supported: the model reads text parts only");
        }
        if (!part.contains("text") || !part["text"].is_string()) {
          return Bad("messages", "a text content part needs a string text");
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

// One prompt: a string or an array of token ids.
std::optional<ApiError> OnePrompt(const json& v, PromptInput* out) {
  if (v.is_string()) {
    out->text = v.get<std::string>();
    return std::nullopt;
  }
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
    out->is_ids = true;
    for (const json& t : v) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        return Bad("prompt", "a token-id prompt must hold non-negative integers");
      }
      out->ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    return std::nullopt;
  }
  return Bad("prompt", "a prompt is a string or an array of token ids");
}

// prompt: a string, token ids, or a list of either (one choice set per prompt).
std::optional<ApiError> ParsePrompt(const json& v, ParsedRequest* out) {
  const bool list = v.is_array() && !v.empty() && (v[0].is_string() || v[0].is_array());
  if (!list) {
    out->prompts.emplace_back();
    return OnePrompt(v, &out->prompts.back());
  }
  if (v.size() > 64) return Bad("prompt", "at most 64 prompts per request");
  for (const json& one : v) {
    out->prompts.emplace_back();
    if (auto e = OnePrompt(one, &out->prompts.back())) return e;
  }
  return std::nullopt;
}

// The fields some step below reads; every other one is accepted, changes nothing, and is
// named in ParsedRequest::ignored.
std::optional<ApiError> ClassifyFields(const json& j, ParsedRequest* r) {
  static const std::set<std::string> kRead = {"model",
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
                                              "ignore_eos",
                                              "presence_penalty",
                                              "frequency_penalty",
                                              "repetition_penalty",
                                              "repeat_penalty",
                                              "repeat_last_n",
                                              "logit_bias",
                                              "logprobs",
                                              "top_logprobs",
                                              "echo",
                                              "suffix",
                                              "best_of",
                                              "tool_choice",
                                              "function_call"};
  static const std::set<std::string> kChatRead = {"tools", "parallel_tool_calls",
                                                  "chat_template_kwargs"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const bool grammar = std::find(std::begin(kGrammarFields), std::end(kGrammarFields),
                                   it.key()) != std::end(kGrammarFields);
    const bool read = kRead.count(it.key()) || (r->chat && kChatRead.count(it.key()));
    if (!read && !grammar) r->ignored.push_back(it.key());
  }
  std::sort(r->ignored.begin(), r->ignored.end());
  return std::nullopt;
}

// echo (completions: the prompt's text first) and suffix (insertion: not done here).
std::optional<ApiError> ParseEcho(const json& j, ParsedRequest* r) {
  if (auto e = GetBool(j, "echo", &r->echo)) return e;
  if (r->echo && r->chat) return Bad("echo", "echo is a completions parameter, not chat's");
  if (r->echo && r->params.logprobs >= 0) {
    return Bad("echo",
               "echo with logprobs asks for the prompt's log-probabilities, which this server "
               "does not compute; drop one of them");
  }
  if (Has(j, "suffix") && !(j["suffix"].is_string() && j["suffix"].get<std::string>().empty())) {
    return Bad("suffix", "suffix (text insertion) is not supported by this server");
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
std::optional<ApiError> SamplingStep(const json& j, ParsedRequest* r) {
  return ParseSampling(j, &r->params);
}
std::optional<ApiError> PenaltiesStep(const json& j, ParsedRequest* r) {
  return ParsePenalties(j, &r->params);
}
std::optional<ApiError> LogitBiasStep(const json& j, ParsedRequest* r) {
  return ParseLogitBias(j, &r->params);
}
std::optional<ApiError> LogprobsStep(const json& j, ParsedRequest* r) {
  return ParseLogprobs(j, r->chat, &r->params);
}
std::optional<ApiError> StopStep(const json& j, ParsedRequest* r) {
  return ParseStop(j, &r->params);
}

}  // namespace

std::string ErrorJson(const ApiError& e) {
  json err = {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json() : json(e.param)},
              {"code", e.code.empty() ? json() : json(e.code)}};
  // The message may quote what a client sent outside JSON (a path, a header): bytes that are
  // not UTF-8 become U+FFFD instead of making dump() throw.
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ApiError ErrorFromStatus(const absl::Status& s) {
  ApiError e;
  e.message = std::string(s.message());
  e.param = ParamOf(s);
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
  for (auto step :
       {ClassifyFields, ParseInput, ParseLengths, SamplingStep, PenaltiesStep, LogitBiasStep,
        LogprobsStep, ParseStreaming, StopStep, ParseEcho, ParseToolFields, ParseGrammarFields}) {
    if (auto e = step(j, &r)) return e;
  }
  *out = std::move(r);
  return std::nullopt;
}

}  // namespace pinfer::server
