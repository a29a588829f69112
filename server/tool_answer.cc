#include "server/tool_answer.h"

#include <algorithm>

namespace pinfer::server {

std::string ToolAnswer::Push(const std::string& text, const std::vector<int32_t>& tokens) {
  raw_ += text;
  for (int32_t id : tokens) {
    if (tok_.IsControl(id) && !tok_.IsEndOfGeneration(id)) {
      raw_ += tok_.spec().tokens[static_cast<size_t>(id)];
    }
  }
  const size_t start = std::max(sent_, ToolCallStart(raw_, syntax_));
  std::string out = raw_.substr(sent_, start - sent_);
  sent_ = start;
  return out;
}

ParsedAnswer ToolAnswer::Finish() {
  const std::string tail = raw_.substr(sent_);
  sent_ = raw_.size();
  ParsedAnswer a = ParseToolCalls(tail, syntax_, names_);
  if (a.calls.empty()) a.content = tail;
  return a;
}

}  // namespace pinfer::server
