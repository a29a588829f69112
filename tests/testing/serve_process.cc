#include "tests/testing/serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/testing/test_models.h"

extern char** environ;

namespace pinfer::testing {

ServeProcess::ServeProcess(const std::vector<std::string>& argv, const std::string& tag) {
  log_ = TempDir(tag) + "/serve.log";
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (posix_spawn(&pid_, cargv[0], &fa, nullptr, cargv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  for (int i = 0; i < 300 && pid_ > 0 && port_ == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string text = Log();
    const size_t at = text.find("on http://127.0.0.1:");
    if (at != std::string::npos) port_ = std::atoi(text.c_str() + at + 20);
    if (port_ == 0 && Reap()) return;  // it ended without serving
  }
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void ServeProcess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

bool ServeProcess::Reap() {
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
  reaped_ = true;
  status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

int ServeProcess::Wait(double timeout_s) {
  for (int i = 0; i < timeout_s * 100 && pid_ > 0 && !reaped_; ++i) {
    if (Reap()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

std::string ServeProcess::Log() const { return ReadTextFile(log_); }

}  // namespace pinfer::testing
