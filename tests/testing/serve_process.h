// `pagedinfer serve` (or any argv that starts it) as a child process of a test, its stderr in
// a log file, its port read from the "serving ... on http://127.0.0.1:PORT" line.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pinfer::testing {

class ServeProcess {
 public:
  // Starts argv (argv[0] a path; no shell unless argv says so) with stderr into a log file
  // named after `tag`; port() is 0 when no port was announced within 30 s.
  ServeProcess(const std::vector<std::string>& argv, const std::string& tag);
  ~ServeProcess();  // kills the process (SIGKILL) if it still runs
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // The exit status (128 + signal when killed by one), -1 if it did not exit in timeout_s.
  int Wait(double timeout_s);
  std::string Log() const;

 private:
  bool Reap();  // true when the process has ended (status_ set)
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool reaped_ = false;
  int status_ = -1;
};

}  // namespace pinfer::testing
