#include "examples/pagedinfer/line_reader.h"

#include <histedit.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

namespace pinfer::cli {

LineReader::LineReader(const char* prog) {
  if (!isatty(fileno(stdin)) || !isatty(fileno(stdout))) return;
  el_ = el_init(prog, stdin, stdout, stderr);
  if (el_ == nullptr) return;
  hist_ = history_init();
  HistEvent ev;
  history(hist_, &ev, H_SETSIZE, 500);
  history(hist_, &ev, H_SETUNIQUE, 1);
  el_set(el_, EL_EDITOR, "emacs");
  el_set(el_, EL_HIST, history, hist_);
  el_set(el_, EL_CLIENTDATA, this);
  el_set(el_, EL_PROMPT, &LineReader::PromptOf);
  el_source(el_, nullptr);  // ~/.editrc, when there is one
}

LineReader::~LineReader() {
  if (el_) el_end(el_);
  if (hist_) history_end(hist_);
}

const char* LineReader::PromptOf(EditLine* el) {
  void* self = nullptr;
  el_get(el, EL_CLIENTDATA, &self);
  return static_cast<LineReader*>(self)->prompt_.c_str();
}

LineReader::Result LineReader::Read(const std::string& prompt, std::string* line) {
  line->clear();
  if (el_ == nullptr) {
    std::fputs(prompt.c_str(), stderr);
    std::fflush(stderr);
    return std::getline(std::cin, *line) ? Result::kLine : Result::kEnd;
  }
  prompt_ = prompt;
  int count = 0;
  errno = 0;
  const char* got = el_gets(el_, &count);
  if (got == nullptr) {
    // A signal handler installed without SA_RESTART makes the read fail with EINTR.
    if (count < 0 && errno == EINTR) {
      el_reset(el_);
      return Result::kInterrupted;
    }
    return Result::kEnd;
  }
  *line = got;
  while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
  return Result::kLine;
}

void LineReader::Remember(const std::string& line) {
  if (hist_ == nullptr || line.empty()) return;
  HistEvent ev;
  history(hist_, &ev, H_ENTER, line.c_str());
}

}  // namespace pinfer::cli
