// An incremental parser of server-sent events (the text/event-stream body OpenAI-compatible
// servers stream completions in): bytes go in as they arrive, in pieces of any size; each
// complete event's data comes out. Only the "data" field matters to a benchmark: comments
// (": keep-alive"), "event", "id" and "retry" lines are skipped. Lines end in LF, CRLF or CR;
// an event ends at a blank line; its data lines are joined with "\n" (the SSE standard).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace pinfer::bench_serve {

class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;

  // Feeds the next bytes of the stream; calls on_data once per event completed by them.
  void Feed(std::string_view bytes, const OnData& on_data);
  // The stream ended: an event still open (no blank line after it) is delivered, as
  // browsers do not but lenient clients do; a trailing partial line counts as a line.
  void Finish(const OnData& on_data);

  // Bytes buffered (an incomplete line); bounded by max_line, beyond which Feed drops the
  // line and counts it in overlong_lines().
  size_t buffered() const { return line_.size(); }
  int overlong_lines() const { return overlong_; }
  static constexpr size_t kMaxLine = 16 << 20;

 private:
  void Line(std::string_view line, const OnData& on_data);

  std::string line_;  // the current line, without its end
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was CR: a following LF belongs to it
  bool dropping_ = false;  // inside an overlong line
  int overlong_ = 0;
};

}  // namespace pinfer::bench_serve
