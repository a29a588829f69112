// The bodies of one completions or chat answer, built from the engine's outputs: OpenAI's
// choices (prompt p's completion i is choice p * n + i), each streamed chunk as its output
// arrives, the whole JSON answer, and the usage chunk. With tools, a chat answer's calls are
// read from its text (tool_answer.h) and returned as tool_calls (finish_reason "tool_calls"),
// in the stream as tool_calls deltas. Plain formatting: no threads, no HTTP.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "loaders/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/openai_request.h"
#include "server/tool_answer.h"

namespace pinfer::server {

// What every body of the answer starts with.
struct ResponseHead {
  std::string id, object, model, system_fingerprint;
  int64_t created = 0;
  nlohmann::json Start() const;
};

class CompletionBody {
 public:
  // tok must outlive the body. prompt_texts: completions' prompt texts, for echo.
  CompletionBody(const Tokenizer& tok, const ParsedRequest& request, ResponseHead head,
                 std::vector<std::string> prompt_texts);

  // Chat answers are read for calls of `tool_names` in `syntax` (before any Fold).
  void EnableTools(ToolSyntax syntax, std::vector<std::string> tool_names);

  // Folds in one output of prompt p; returns its streamed chunks (none when it has nothing
  // to show yet).
  std::vector<nlohmann::json> Fold(size_t p, const SequenceOutput& o);
  nlohmann::json Body() const;        // the non-streamed answer
  nlohmann::json UsageChunk() const;  // a stream's last chunk with include_usage

 private:
  struct Choice {
    std::string text;
    std::string finish_reason;
    int output_tokens = 0;
    bool started = false;  // streaming: the first chunk (role / echoed prompt) went out
    std::vector<SampledLogprobs> logprobs;
    size_t text_offset = 0;             // completions logprobs: where the next token's text begins
    std::shared_ptr<ToolAnswer> tools;  // with tools: the answer being read for calls
    std::vector<ToolCall> calls;
    std::vector<std::string> call_ids;  // "call_..." one per call
  };
  nlohmann::json ChoiceLogprobs(const std::vector<SampledLogprobs>& lps, Choice* c) const;
  // The chat chunks of one output: the delta (role, content), then each call's.
  std::vector<nlohmann::json> ChatChunks(int index, Choice& c, const std::string& text, bool first,
                                         const SequenceOutput& o) const;
  nlohmann::json Message(const Choice& c) const;
  nlohmann::json Usage() const;

  const Tokenizer& tok_;
  const bool chat_, echo_, want_logprobs_;
  const int n_;
  const ResponseHead head_;
  const std::vector<std::string> prompt_texts_;
  std::map<size_t, int> prompt_tokens_, cached_tokens_;  // by prompt
  std::map<int, Choice> choices_;                        // by choice index
  bool tools_ = false;
  ToolSyntax syntax_ = ToolSyntax::kHermes;
  std::vector<std::string> tool_names_;
};

}  // namespace pinfer::server
