#include "bench/serve/sse.h"

namespace pinfer::bench_serve {

void SseParser::Feed(std::string_view bytes, const OnData& on_data) {
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') continue;  // CRLF: the line ended at the CR
    }
    if (c == '\n' || c == '\r') {
      after_cr_ = c == '\r';
      if (!dropping_) Line(line_, on_data);
      dropping_ = false;
      line_.clear();
      continue;
    }
    if (dropping_) continue;
    if (line_.size() >= kMaxLine) {
      dropping_ = true;
      ++overlong_;
      line_.clear();
      continue;
    }
    line_.push_back(c);
  }
}

void SseParser::Finish(const OnData& on_data) {
  if (!line_.empty() && !dropping_) Line(line_, on_data);
  line_.clear();
  dropping_ = false;
  Line("", on_data);
}

void SseParser::Line(std::string_view line, const OnData& on_data) {
  if (line.empty()) {  // the blank line that ends an event
    if (has_data_) on_data(data_);
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace pinfer::bench_serve
