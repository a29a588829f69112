#include "examples/pagedinfer/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pinfer::cli {

bool ProgressWanted() {
  if (const char* env = std::getenv("PAGEDINFER_PROGRESS"); env && *env) {
    return std::strcmp(env, "0") != 0;
  }
  return isatty(fileno(stderr)) != 0;
}

TensorProgress TensorProgressLines() {
  if (!ProgressWanted()) return {};
  return [](const TensorProgressInfo& t) {
    const int width = static_cast<int>(std::to_string(t.total).size());
    std::fprintf(stderr, "[%*d/%*d] %-32s %-18s %s -> %-6s %9.2f MiB\n", width, t.index, width,
                 t.total, t.name.c_str(), absl::StrJoin(t.dims, " x ").c_str(), t.from.c_str(),
                 std::string(GgmlTypeInfoOf(t.to).name).c_str(),
                 static_cast<double>(t.out_bytes) / (1 << 20));
    std::fflush(stderr);
  };
}

LoadProgress::LoadProgress(std::string what)
    : what_(std::move(what)), wanted_(ProgressWanted()), t0_(std::chrono::steady_clock::now()) {
  if (wanted_) thread_ = std::thread([this] { Loop(); });
}

LoadProgress::~LoadProgress() { Done(); }

void LoadProgress::Stage(std::string stage) {
  std::lock_guard<std::mutex> lock(mu_);
  stage_ = std::move(stage);
}

void LoadProgress::Draw(double secs) {
  std::fprintf(stderr, "\r\033[Kloading %s: %s... %.1f s", what_.c_str(), stage_.c_str(), secs);
  std::fflush(stderr);
  shown_ = true;
}

void LoadProgress::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return done_; });
    if (done_) break;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (s >= 1.0) Draw(s);
  }
}

void LoadProgress::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (shown_) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    std::fprintf(stderr, "\r\033[Kloaded %s in %.1f s\n", what_.c_str(), s);
  }
}

}  // namespace pinfer::cli
