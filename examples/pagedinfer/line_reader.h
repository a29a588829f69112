// Reads the user's lines for `pagedinfer chat`: with libedit's line editing (arrow keys,
// Ctrl-A/E, ...) and an in-memory history (up/down) when stdin is a terminal, or plain
// lines from a pipe or file otherwise.
#pragma once

#include <optional>
#include <string>

struct editline;
struct history;

namespace pinfer::cli {

class LineReader {
 public:
  // prog: the name libedit reads its settings (~/.editrc) under.
  explicit LineReader(const char* prog);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  enum class Result { kLine, kInterrupted, kEnd };
  // Prints `prompt` (to stderr without a terminal) and reads one line, without its newline,
  // into *line. kInterrupted: a signal (Ctrl-C) arrived while reading; the partial line is
  // dropped. kEnd: end of input (Ctrl-D on an empty line, or the end of a pipe).
  Result Read(const std::string& prompt, std::string* line);
  // Adds a line to the history (the up arrow brings it back). Empty lines are skipped.
  void Remember(const std::string& line);
  bool editing() const { return el_ != nullptr; }

 private:
  static const char* PromptOf(struct editline* el);
  struct editline* el_ = nullptr;
  struct history* hist_ = nullptr;
  std::string prompt_;
};

}  // namespace pinfer::cli
