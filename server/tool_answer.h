// One chat choice's answer while tools may be called: its text as it arrives (control tokens
// such as [TOOL_CALLS] or <|python_tag|> spelled out, since the decoded text drops them),
// the content that can be streamed before a call may start (tool_calls.h's ToolCallStart),
// and at the end the calls and the rest of the content. Tool calls therefore reach a
// streaming client whole, when the answer ends, not token by token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loaders/tokenizer.h"
#include "server/tool_calls.h"

namespace pinfer::server {

class ToolAnswer {
 public:
  // tok must outlive the answer.
  ToolAnswer(const Tokenizer& tok, ToolSyntax syntax, std::vector<std::string> tool_names)
      : tok_(tok), syntax_(syntax), names_(std::move(tool_names)) {}

  // Takes a step's text and tokens; returns the content that can be sent now.
  std::string Push(const std::string& text, const std::vector<int32_t>& tokens);
  // The answer ended: the content Push has not returned yet, and the calls. When no call
  // parses, all of that text is content.
  ParsedAnswer Finish();

 private:
  const Tokenizer& tok_;
  const ToolSyntax syntax_;
  const std::vector<std::string> names_;
  std::string raw_;  // the answer so far, control tokens spelled out
  size_t sent_ = 0;  // bytes of raw_ returned as content
};

}  // namespace pinfer::server
