// The /v1/completions and /v1/chat/completions handlers: request -> prompt ids -> the engine
// worker -> one JSON response, or server-sent events (OpenAI chunk shapes, then [DONE]).
// Nothing here waits: the handler posts the request to the engine worker, and each batch of
// outputs is formatted and written on the connection's I/O thread as it arrives. A client
// that hangs up cancels its request (streamed or not), which frees its KV blocks.
#pragma once

#include <memory>
#include <string>

#include "loaders/tokenizer.h"
#include "server/chat_prompt.h"
#include "server/chat_template.h"
#include "server/engine_worker.h"
#include "server/http/exchange.h"
#include "server/openai_request.h"

namespace pinfer::server {

class CompletionsHandler {
 public:
  // tok and worker must outlive the handler. The tokenizer is immutable and only read.
  // special_in_content: also turn special-token text inside chat messages into special
  // tokens (llama.cpp's behaviour; off: only the template's own text is parsed for them).
  CompletionsHandler(const Tokenizer& tok, int max_model_len, EngineWorker& worker,
                     ChatTemplate tmpl, std::string model_id, bool special_in_content = false)
      : tok_(tok),
        max_model_len_(max_model_len),
        worker_(worker),
        tmpl_(tmpl),
        model_id_(std::move(model_id)),
        special_in_content_(special_in_content),
        chat_encoder_(tok) {}

  // Runs on a handler-pool thread; answers later, from the connection's I/O thread.
  void Handle(std::shared_ptr<http::Exchange> exchange, bool chat);

 private:
  const Tokenizer& tok_;
  const int max_model_len_;
  EngineWorker& worker_;
  const ChatTemplate tmpl_;
  const std::string model_id_;
  const bool special_in_content_;
  const ChatPromptEncoder chat_encoder_;
};

// An OpenAI error JSON response (with Retry-After on 503).
http::Response ErrorResponse(const ApiError& e);

}  // namespace pinfer::server
