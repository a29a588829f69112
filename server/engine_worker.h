// The one thread that drives an Engine: it runs Step() in a loop (continuous batching across
// every submitted request) and, between steps, the work other threads hand it (submissions,
// cancellations, snapshots). No other thread touches the engine.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"

namespace pinfer::server {

// What one request's n sequences produce, handed from the engine thread to the waiting
// handler thread.
class RequestStream {
 public:
  RequestStream(int64_t id, int n) : id_(id), unfinished_(n) {}
  int64_t id() const { return id_; }
  // Moves the outputs that arrived into *out; waits up to timeout for the first one. Returns
  // false when the timeout passed with nothing new and the request is not over.
  bool Wait(std::vector<SequenceOutput>* out, std::chrono::milliseconds timeout);
  // True once every sequence finished, or the request failed (see status()).
  bool done() const;
  absl::Status status() const;

 private:
  friend class EngineWorker;
  void Push(const SequenceOutput& o);
  void Fail(absl::Status s);

  const int64_t id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SequenceOutput> queue_;
  int unfinished_;
  absl::Status status_;
};

// Totals the worker keeps beside the engine's own statistics.
struct WorkerCounters {
  int64_t requests_accepted = 0, requests_rejected = 0, requests_cancelled = 0;
  int64_t prompt_tokens = 0;                     // prompt tokens of accepted requests
  double prefill_rate = 0, generation_rate = 0;  // tokens/s over the last ~10 s
};

class EngineWorker {
 public:
  explicit EngineWorker(Engine& engine);  // starts the thread
  ~EngineWorker();                        // stops it; unfinished requests fail
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Engine::AddRequest on the engine thread: its InvalidArgument / ResourceExhausted errors.
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(GenerationRequest request);
  // Drops the request and frees its blocks (asynchronously; no-op when it is over).
  void Cancel(int64_t request_id);
  // Runs fn on the engine thread between two steps and waits for it to return.
  void Run(const std::function<void(Engine&)>& fn);
  WorkerCounters counters();

 private:
  struct Sample {
    std::chrono::steady_clock::time_point t;
    int64_t prefill, generated;
  };
  void Loop();
  void RunTasks(std::unique_lock<std::mutex>& lock);
  void Dispatch(const std::vector<SequenceOutput>& outs);
  void FailAll(const absl::Status& s);
  void TakeSample();

  Engine& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  std::vector<int64_t> cancels_;             // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  WorkerCounters counters_;                  // guarded by mu_
  std::deque<Sample> samples_;               // guarded by mu_
  // Engine thread only.
  std::map<int64_t, std::shared_ptr<RequestStream>> streams_;
  std::thread thread_;
};

}  // namespace pinfer::server
