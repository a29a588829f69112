#include "tests/testing/cli_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace pinfer::testing {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<char*> Argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string PagedinferBin() {
  const char* bin = std::getenv("PAGEDINFER_BIN");
  if (bin == nullptr || !std::filesystem::exists(bin)) return "";
  return bin;
}

CommandResult RunCommand(const std::vector<std::string>& argv, const std::string& input,
                         double timeout_s) {
  CommandResult r;
  int in[2], out[2], err[2];
  if (pipe(in) != 0 || pipe(out) != 0 || pipe(err) != 0) return r;
  const pid_t pid = fork();
  if (pid < 0) return r;
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    std::vector<char*> args = Argv(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  signal(SIGPIPE, SIG_IGN);
  if (!input.empty() && write(in[1], input.data(), input.size()) < 0) {
    // the program may have exited without reading: its output says why
  }
  close(in[1]);
  const auto t0 = Clock::now();
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0 && SecondsSince(t0) < timeout_s) {
    if (poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  if (open_fds > 0) kill(pid, SIGKILL);
  for (const pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.rc = ExitCode(status);
  return r;
}

std::unique_ptr<PtyProcess> PtyProcess::Start(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& env) {
  winsize ws = {};
  ws.ws_row = 40;
  ws.ws_col = 80;
  int fd = -1;
  const pid_t pid = forkpty(&fd, nullptr, nullptr, &ws);
  if (pid < 0) return nullptr;
  if (pid == 0) {
    setenv("TERM", "xterm", 1);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args = Argv(argv);
    execv(args[0], args.data());
    _exit(127);
  }
  return std::unique_ptr<PtyProcess>(new PtyProcess(pid, fd));
}

PtyProcess::~PtyProcess() {
  if (status_ < 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(fd_);
}

void PtyProcess::Type(std::string_view keys) {
  // One key at a time, as typed, so a program reading a character at a time sees each.
  for (char c : keys) {
    if (write(fd_, &c, 1) != 1) return;
    usleep(2000);
  }
}

bool PtyProcess::ReadSome(double timeout_s) {
  pollfd p = {fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return true;
  char buf[4096];
  const ssize_t n = read(fd_, buf, sizeof buf);
  if (n <= 0) return false;  // EIO: the program closed the terminal
  out_.append(buf, static_cast<size_t>(n));
  return true;
}

bool PtyProcess::WaitFor(std::string_view text, size_t from, double timeout_s) {
  const auto t0 = Clock::now();
  while (true) {
    if (out_.size() >= from && out_.find(text, from) != std::string::npos) return true;
    if (SecondsSince(t0) >= timeout_s || !ReadSome(0.1)) {
      return out_.size() >= from && out_.find(text, from) != std::string::npos;
    }
  }
}

bool PtyProcess::WaitForBytes(size_t bytes, double timeout_s) {
  const auto t0 = Clock::now();
  while (out_.size() < bytes) {
    if (SecondsSince(t0) >= timeout_s || !ReadSome(0.1)) break;
  }
  return out_.size() >= bytes;
}

int PtyProcess::Wait(double timeout_s) {
  const auto t0 = Clock::now();
  while (status_ < 0 && SecondsSince(t0) < timeout_s) {
    ReadSome(0.05);  // keep the terminal drained so the program can finish writing
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) status_ = ExitCode(status);
  }
  return status_;
}

}  // namespace pinfer::testing
