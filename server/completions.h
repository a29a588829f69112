// The /v1/completions and /v1/chat/completions handlers: request -> prompt ids -> the engine
// worker -> one JSON response, or server-sent events (OpenAI chunk shapes, then [DONE]).
// Nothing here waits: the handler checks each engine request (Engine::Validate: a bad one is
// a 400 at once) and posts it to the engine worker, and each batch of outputs is formatted
// and written on the connection's I/O thread as it arrives. A completions request with a
// list of prompts posts one engine request per prompt. A client that hangs up cancels its
// requests (streamed or not), which frees their KV blocks. Fields the parser accepted
// without effect are named in an X-Ignored-Fields header and a log line, as vLLM logs them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "loaders/tokenizer.h"
#include "server/chat_formatter.h"
#include "server/chat_prompt.h"
#include "server/engine_worker.h"
#include "server/http/exchange.h"
#include "server/openai_request.h"

namespace pinfer::server {

class CompletionsHandler {
 public:
  // engine (for Validate, which reads only its model and config) and worker must outlive
  // the handler. formatter: how chats become prompts (the model's template or a built-in
  // one). model_id: what responses name as their model; fingerprint: their
  // system_fingerprint. special_in_content: also turn special-token text inside chat
  // messages into special tokens (llama.cpp's behaviour; off: only the template's own text
  // is parsed for them).
  CompletionsHandler(const Engine& engine, EngineWorker& worker,
                     std::shared_ptr<const ChatFormatter> formatter, std::string model_id,
                     std::string fingerprint, bool special_in_content = false)
      : engine_(engine),
        tok_(engine.model().tokenizer()),
        max_model_len_(engine.config().max_model_len),
        worker_(worker),
        formatter_(std::move(formatter)),
        model_id_(std::move(model_id)),
        fingerprint_(std::move(fingerprint)),
        special_in_content_(special_in_content),
        chat_encoder_(tok_) {}

  // Runs on a handler-pool thread; answers later, from the connection's I/O thread.
  void Handle(std::shared_ptr<http::Exchange> exchange, bool chat);

 private:
  // The engine requests of a parsed request: the chat's one (formatted by the chat
  // template), or one per prompt; and, for echo, each prompt's text. A 400 when the
  // template refuses the messages or a forced call's grammar cannot be built.
  std::optional<ApiError> EngineRequests(const ParsedRequest& pr,
                                         std::vector<GenerationRequest>* out,
                                         std::vector<std::string>* prompt_texts) const;
  // tool_choice required or a named function: the grammar of a call (tool_calls.h).
  std::optional<ApiError> ForcedCall(const ParsedRequest& pr, GenerationRequest* g) const;

  const Engine& engine_;
  const Tokenizer& tok_;
  const int max_model_len_;
  EngineWorker& worker_;
  const std::shared_ptr<const ChatFormatter> formatter_;
  const std::string model_id_;
  const std::string fingerprint_;
  const bool special_in_content_;
  const ChatPromptEncoder chat_encoder_;
};

// An OpenAI error JSON response (with Retry-After on 503).
http::Response ErrorResponse(const ApiError& e);

}  // namespace pinfer::server
