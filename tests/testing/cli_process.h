// Running the built pagedinfer binary from tests: a command with its stdout and stderr
// collected, or a program on a pseudo-terminal that the test types into (a user's terminal:
// line editing, Ctrl-C), for the CLI's end-to-end tests.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pinfer::testing {

// $PAGEDINFER_BIN (set by CTest) when it names an existing file, else "".
std::string PagedinferBin();

struct CommandResult {
  int rc = -1;  // exit status; -1 when it could not run, 128 + N when killed by signal N
  std::string out, err;
};

// Runs argv (no shell) with `input` on stdin, waiting up to timeout_s seconds (then killed).
CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input = "",
                         double timeout_s = 120);

// A program started on a new pseudo-terminal (80 columns), as a user's shell would start it.
class PtyProcess {
 public:
  // env: extra "NAME=value" entries. nullptr when the terminal or the fork fails.
  static std::unique_ptr<PtyProcess> Start(const std::vector<std::string>& argv,
                                           const std::vector<std::string>& env = {});
  ~PtyProcess();  // kills the program if it still runs

  // Sends keys as typed: "\r" is Enter, "\x03" Ctrl-C (the terminal turns it into SIGINT),
  // "\x04" Ctrl-D, "\x1b[D" the left arrow, "\x1b[A" the up arrow.
  void Type(std::string_view keys);
  // Reads output until `text` appears at or after byte `from` of everything shown so far;
  // false after timeout_s seconds or when the program ended without showing it.
  bool WaitFor(std::string_view text, size_t from = 0, double timeout_s = 30);
  // Reads until the output holds at least `bytes` bytes; false after timeout_s seconds.
  bool WaitForBytes(size_t bytes, double timeout_s = 30);
  // Everything the terminal received, escape sequences included.
  const std::string& output() const { return out_; }
  // Waits for the program to end; its exit status (128 + N when killed by signal N), or -1
  // on timeout.
  int Wait(double timeout_s = 30);

 private:
  PtyProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  bool ReadSome(double timeout_s);  // false when the terminal closed
  pid_t pid_;
  int fd_;
  int status_ = -1;
  std::string out_;
};

}  // namespace pinfer::testing
