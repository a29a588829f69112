// The one thread that drives an Engine: it runs Step() in a loop (continuous batching across
// every submitted request) and, between steps, the work other threads hand it (submissions,
// cancellations). No other thread touches the engine, and no other thread waits for it:
// submissions are posted, outputs are pushed to each request's RequestStream (which calls
// its notifier), and the figures /metrics and /v1/memory show are published in a snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "server/serving_metrics.h"

namespace pinfer::server {

// What one request's n sequences produce, handed from the engine thread to the handler
// that answers it. Thread-safe.
class RequestStream {
 public:
  explicit RequestStream(int n) : unfinished_(n) {}
  RequestStream(int64_t id, int n) : id_(id), unfinished_(n) {}  // already accepted (tests)

  // Called on the engine thread after each change (accepted, outputs, failure); must not
  // block. Set it before the stream is submitted.
  void SetNotify(std::function<void()> fn) { notify_ = std::move(fn); }

  int64_t id() const { return id_.load(); }  // the engine's request id; -1 until accepted
  bool accepted() const { return id_.load() >= 0; }
  // Moves the outputs that arrived into *out (never waits).
  void Take(std::vector<SequenceOutput>* out);
  // Like Take, but waits up to timeout for something to happen. False when the timeout
  // passed with nothing new and the request is not over.
  bool Wait(std::vector<SequenceOutput>* out, std::chrono::milliseconds timeout);
  // True once every sequence finished or the request failed, and every output was taken.
  bool done() const;
  // Not ok when the request was refused at submission (then !accepted()), cancelled, or
  // ended by the engine or the server stopping.
  absl::Status status() const;

 private:
  friend class EngineWorker;
  void Accept(int64_t id);
  void Push(const SequenceOutput& o);
  void Fail(absl::Status s);
  void Notify(bool last);
  bool finished() const;  // engine thread: no sequence left to produce

  std::atomic<int64_t> id_{-1};
  std::function<void()> notify_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SequenceOutput> queue_;  // guarded by mu_
  int unfinished_;                    // guarded by mu_
  absl::Status status_;               // guarded by mu_
  std::atomic<bool> cancel_requested_{false};
};

// Totals the worker keeps beside the engine's own statistics.
struct WorkerCounters {
  int64_t requests_accepted = 0, requests_rejected = 0, requests_cancelled = 0;
  int64_t prompt_tokens = 0;                     // prompt tokens of accepted requests
  double prefill_rate = 0, generation_rate = 0;  // tokens/s over the last ~10 s
};

// What /metrics and /v1/memory show, as of the engine thread's last publication: after
// every batch of submissions and cancellations, at most every 100 ms while it steps, and
// whenever it goes idle.
struct WorkerSnapshot {
  EngineStats stats;
  OccupancyReport kv;
  WorkerCounters counters;
  int64_t submissions_queued = 0;  // posted, not yet handed to the engine
  ServingMetrics serving;          // vLLM's latency histograms and finish reasons
};

class EngineWorker {
 public:
  explicit EngineWorker(Engine& engine);  // starts the thread
  ~EngineWorker();                        // stops it; unfinished requests fail
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // Posts the request; the engine thread calls Engine::AddRequest between two steps and
  // then Accept()s or Fail()s the stream (InvalidArgument, ResourceExhausted; Unavailable
  // once Close()d). Never waits for the engine.
  void Submit(GenerationRequest request, std::shared_ptr<RequestStream> stream);
  // Submit and wait for the engine's answer (tests, tools).
  absl::StatusOr<std::shared_ptr<RequestStream>> Submit(GenerationRequest request);
  // Drops the request and frees its blocks (asynchronously; no-op when it is over). A stream
  // not yet accepted is dropped before it reaches the engine.
  void Cancel(std::shared_ptr<RequestStream> stream);
  void Cancel(int64_t request_id);
  // Ends every request now with `status` (streams see it as their status) and refuses all
  // later submissions with it: the last step of a shutdown.
  void Close(absl::Status status);
  // Runs fn on the engine thread between two steps and waits for it to return.
  void Run(const std::function<void(Engine&)>& fn);

  WorkerSnapshot snapshot() const;
  WorkerCounters counters() const { return snapshot().counters; }
  const std::string& ledger_json() const { return ledger_json_; }  // fixed at start

 private:
  struct Sample {
    std::chrono::steady_clock::time_point t;
    int64_t prefill, generated;
  };
  struct Submission {
    GenerationRequest request;
    std::shared_ptr<RequestStream> stream;
    std::chrono::steady_clock::time_point posted;
  };
  // A request's times for the serving metrics (engine thread only).
  struct Timing {
    std::chrono::steady_clock::time_point arrival;
    bool first_token = false;
    std::map<int, std::chrono::steady_clock::time_point> last_token;  // by completion index
    std::string reason;  // "length" when any completion ran out, else "stop"
  };
  void Loop();
  bool RunTasks(std::unique_lock<std::mutex>& lock);  // true when it ran anything
  void AddOne(Submission s);
  void CancelOne(const std::shared_ptr<RequestStream>& stream);
  void Dispatch(const std::vector<SequenceOutput>& outs);
  void Observe(Timing& t, const SequenceOutput& o, std::chrono::steady_clock::time_point now);
  void FailAll(const absl::Status& s);
  void TakeSample();
  void Publish(bool force);

  Engine& engine_;
  const std::string ledger_json_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;              // guarded by mu_
  std::deque<Submission> submissions_;                   // guarded by mu_
  std::vector<std::shared_ptr<RequestStream>> cancels_;  // guarded by mu_
  std::vector<int64_t> cancel_ids_;                      // guarded by mu_
  absl::Status closed_;                                  // guarded by mu_ (ok: open)
  bool close_pending_ = false;                           // guarded by mu_
  bool stop_ = false;                                    // guarded by mu_
  WorkerCounters counters_;                              // guarded by mu_
  mutable std::mutex snapshot_mu_;
  WorkerSnapshot snapshot_;  // guarded by snapshot_mu_
  // Engine thread only.
  std::deque<Sample> samples_;
  std::chrono::steady_clock::time_point published_;
  std::map<int64_t, std::shared_ptr<RequestStream>> streams_;
  std::map<int64_t, Timing> timing_;  // by engine request id
  ServingMetrics serving_;
  std::vector<std::chrono::steady_clock::time_point> step_at_;  // step s starts at s % size
  std::thread thread_;
};

}  // namespace pinfer::server
