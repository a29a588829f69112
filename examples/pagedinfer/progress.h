// Progress on stderr for the commands that take a while: a line per tensor for quantize and
// convert (as llama-quantize prints), and a line for loading a model that takes over a
// second. Both stay quiet when stderr is not a terminal (a log file or a pipe gets none).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "engine/convert/tensor_progress.h"

namespace pinfer::cli {

// True when stderr is a terminal (PAGEDINFER_PROGRESS=1 forces progress on, =0 off).
bool ProgressWanted();

// "[  3/ 48] blk.0.attn_q.weight          64 x 64   F32 -> Q8_0     0.02 MiB": a line per
// tensor, or an empty TensorProgress when progress is not wanted.
TensorProgress TensorProgressLines();

// A line "loading MODEL: STAGE... 1.4 s" redrawn every 0.2 s on stderr once a stage has run a
// second, ended by "loaded MODEL in 2.3 s" when it was shown. Quiet when progress is not
// wanted or everything takes under a second.
class LoadProgress {
 public:
  explicit LoadProgress(std::string what);
  ~LoadProgress();  // Done() if not yet called
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;

  void Stage(std::string stage);  // the step now running ("mapping the file", ...)
  void Done();                    // ends the line (if one was drawn); idempotent

 private:
  void Loop();
  void Draw(double secs);  // with mu_ held

  const std::string what_;
  const bool wanted_;
  const std::chrono::steady_clock::time_point t0_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string stage_;   // guarded by mu_
  bool done_ = false;   // guarded by mu_
  bool shown_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace pinfer::cli
