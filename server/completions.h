// The /v1/completions and /v1/chat/completions handlers: request -> prompt ids -> the engine
// worker -> one JSON response, or server-sent events (OpenAI chunk shapes, then [DONE]).
#pragma once

#include <string>

#include "loaders/tokenizer.h"
#include "server/chat_template.h"
#include "server/engine_worker.h"
#include "server/openai_request.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace pinfer::server {

class CompletionsHandler {
 public:
  // tok and worker must outlive the handler. The tokenizer is immutable and only read.
  CompletionsHandler(const Tokenizer& tok, int max_model_len, EngineWorker& worker,
                     ChatTemplate tmpl, std::string model_id)
      : tok_(tok),
        max_model_len_(max_model_len),
        worker_(worker),
        tmpl_(tmpl),
        model_id_(std::move(model_id)) {}

  void Handle(const httplib::Request& req, httplib::Response& res, bool chat);

 private:
  const Tokenizer& tok_;
  const int max_model_len_;
  EngineWorker& worker_;
  const ChatTemplate tmpl_;
  const std::string model_id_;
};

// Writes an OpenAI error JSON response (with Retry-After on 503).
void SendError(httplib::Response& res, const ApiError& e);

}  // namespace pinfer::server
