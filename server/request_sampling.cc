#include "server/request_sampling.h"

#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

#include "server/request_json.h"

namespace pinfer::server {

using json = request_json::json;
using request_json::Bad;
using request_json::GetBool;
using request_json::GetInt;
using request_json::GetNumber;
using request_json::Has;

std::optional<ApiError> ParseSampling(const json& j, SamplingParams* p) {
  if (auto e = GetNumber(j, "temperature", 0, 2, &p->temperature)) return e;
  if (auto e = GetNumber(j, "top_p", 0, 1, &p->top_p)) return e;
  if (p->top_p <= 0) return Bad("top_p", "top_p must be greater than 0");
  if (auto e = GetNumber(j, "min_p", 0, 1, &p->min_p)) return e;
  int64_t i = 0;
  if (auto e = GetInt(j, "top_k", -1, 1 << 30, &i)) return e;  // -1: off, as vLLM takes it
  p->top_k = static_cast<int>(std::max<int64_t>(i, 0));
  if (Has(j, "seed")) {
    if (auto e = GetInt(j, "seed", INT64_MIN, INT64_MAX, &i)) return e;
    p->seed = static_cast<uint64_t>(i);
  }
  return GetBool(j, "ignore_eos", &p->ignore_eos);
}

std::optional<ApiError> ParsePenalties(const json& j, SamplingParams* p) {
  if (auto e = GetNumber(j, "presence_penalty", -2, 2, &p->presence_penalty)) return e;
  if (auto e = GetNumber(j, "frequency_penalty", -2, 2, &p->frequency_penalty)) return e;
  if (Has(j, "repetition_penalty") && Has(j, "repeat_penalty")) {
    return Bad("repeat_penalty",
               "give repetition_penalty (vLLM: over the whole sequence) or repeat_penalty "
               "(llama.cpp: over the last repeat_last_n tokens), not both");
  }
  if (Has(j, "repetition_penalty")) {
    if (auto e = GetNumber(j, "repetition_penalty", 0.01, 10, &p->repetition_penalty)) return e;
    p->repeat_last_n = -1;
  }
  if (Has(j, "repeat_penalty")) {
    if (auto e = GetNumber(j, "repeat_penalty", 0.01, 10, &p->repetition_penalty)) return e;
    p->repeat_last_n = 64;
  }
  int64_t n = p->repeat_last_n;
  if (auto e = GetInt(j, "repeat_last_n", -1, 1 << 20, &n)) return e;
  p->repeat_last_n = static_cast<int>(n);
  return std::nullopt;
}

namespace {

std::optional<ApiError> BiasEntry(const json& id, const json& bias, SamplingParams* p) {
  int64_t token = -1;
  if (id.is_number_integer()) {
    token = id.get<int64_t>();
  } else if (id.is_string()) {
    const std::string s = id.get<std::string>();
    char* end = nullptr;
    errno = 0;
    token = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0) token = -1;
  }
  if (token < 0 || token > INT32_MAX) {
    return Bad("logit_bias",
               "logit_bias keys are token ids (e.g. {\"50256\": -100}), not " + id.dump());
  }
  if (!bias.is_number() || bias.get<double>() < -100 || bias.get<double>() > 100) {
    return Bad("logit_bias", "logit_bias values are numbers from -100 to 100, not " + bias.dump());
  }
  p->logit_bias.push_back({static_cast<int32_t>(token), bias.get<float>()});
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseLogitBias(const json& j, SamplingParams* p) {
  if (!Has(j, "logit_bias")) return std::nullopt;
  const json& b = j["logit_bias"];
  if (b.is_object()) {
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (auto e = BiasEntry(json(it.key()), it.value(), p)) return e;
    }
  } else if (b.is_array()) {  // llama.cpp: [[id, bias], ...]
    for (const json& pair : b) {
      if (!pair.is_array() || pair.size() != 2) {
        return Bad("logit_bias", "logit_bias as an array holds [token id, bias] pairs");
      }
      if (auto e = BiasEntry(pair[0], pair[1], p)) return e;
    }
  } else {
    return Bad("logit_bias", "logit_bias must be an object of token id -> bias");
  }
  // One entry per id: the last one given wins.
  std::map<int32_t, float> unique;
  for (const auto& [id, bias] : p->logit_bias) unique[id] = bias;
  p->logit_bias.assign(unique.begin(), unique.end());
  return std::nullopt;
}

std::optional<ApiError> ParseLogprobs(const json& j, bool chat, SamplingParams* p) {
  int64_t k = -1;
  if (!chat) {  // completions: logprobs is the number of alternatives
    if (auto e = GetInt(j, "logprobs", 0, kMaxTopLogprobs, &k)) return e;
    p->logprobs = static_cast<int>(k);
    if (Has(j, "top_logprobs")) {
      return Bad("top_logprobs", "completions take logprobs: N; top_logprobs is for chat");
    }
    return std::nullopt;
  }
  bool want = false;
  if (auto e = GetBool(j, "logprobs", &want)) return e;
  if (auto e = GetInt(j, "top_logprobs", 0, kMaxTopLogprobs, &k)) return e;
  if (k >= 0 && !want) {
    return Bad("top_logprobs", "top_logprobs needs logprobs: true");
  }
  p->logprobs = want ? static_cast<int>(std::max<int64_t>(k, 0)) : -1;
  return std::nullopt;
}

}  // namespace pinfer::server
