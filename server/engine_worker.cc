#include "server/engine_worker.h"

#include <future>

namespace pinfer::server {

using Clock = std::chrono::steady_clock;

bool RequestStream::Wait(std::vector<SequenceOutput>* out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || unfinished_ == 0 || !status_.ok(); });
  const bool got = !queue_.empty();
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return got || unfinished_ == 0 || !status_.ok();
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return (unfinished_ == 0 || !status_.ok()) && queue_.empty();
}

absl::Status RequestStream::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void RequestStream::Push(const SequenceOutput& o) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(o);
    if (o.finished && unfinished_ > 0) --unfinished_;
  }
  cv_.notify_all();
}

void RequestStream::Fail(absl::Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = std::move(s);
  }
  cv_.notify_all();
}

EngineWorker::EngineWorker(Engine& engine) : engine_(engine) {
  thread_ = std::thread([this] { Loop(); });
}

EngineWorker::~EngineWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void EngineWorker::Run(const std::function<void(Engine&)>& fn) {
  std::promise<void> done;
  std::future<void> f = done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    tasks_.push_back([&] {
      fn(engine_);
      done.set_value();
    });
  }
  cv_.notify_all();
  f.wait();
}

absl::StatusOr<std::shared_ptr<RequestStream>> EngineWorker::Submit(GenerationRequest request) {
  absl::StatusOr<std::shared_ptr<RequestStream>> result =
      absl::UnavailableError("the server is shutting down");
  const int n = request.n;
  const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
  Run([&](Engine& e) {
    absl::StatusOr<int64_t> rid = e.AddRequest(std::move(request));
    std::lock_guard<std::mutex> lock(mu_);
    if (!rid.ok()) {
      ++counters_.requests_rejected;
      result = rid.status();
      return;
    }
    ++counters_.requests_accepted;
    counters_.prompt_tokens += prompt_tokens;
    auto stream = std::make_shared<RequestStream>(*rid, n);
    streams_[*rid] = stream;
    result = stream;
  });
  return result;
}

void EngineWorker::Cancel(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(request_id);
  }
  cv_.notify_all();
}

WorkerCounters EngineWorker::counters() {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

// Runs queued tasks and cancellations with the lock released around each (they may take mu_).
void EngineWorker::RunTasks(std::unique_lock<std::mutex>& lock) {
  while (!tasks_.empty() || !cancels_.empty()) {
    std::vector<int64_t> cancels;
    cancels.swap(cancels_);
    std::deque<std::function<void()>> tasks;
    tasks.swap(tasks_);
    lock.unlock();
    for (int64_t rid : cancels) {
      auto it = streams_.find(rid);
      if (it == streams_.end()) continue;  // already over
      engine_.Cancel(rid);
      it->second->Fail(absl::CancelledError("the request was cancelled"));
      streams_.erase(it);
      std::lock_guard<std::mutex> l(mu_);
      ++counters_.requests_cancelled;
    }
    for (auto& t : tasks) t();
    lock.lock();
  }
}

void EngineWorker::Dispatch(const std::vector<SequenceOutput>& outs) {
  for (const SequenceOutput& o : outs) {
    auto it = streams_.find(o.request_id);
    if (it == streams_.end()) continue;
    it->second->Push(o);
    // unfinished_ is only written on this thread (in Push), so reading it here is safe.
    if (it->second->unfinished_ == 0) streams_.erase(it);
  }
}

void EngineWorker::FailAll(const absl::Status& s) {
  for (auto& [rid, stream] : streams_) {
    engine_.Cancel(rid);
    stream->Fail(s);
  }
  streams_.clear();
}

void EngineWorker::TakeSample() {
  const auto now = Clock::now();
  if (!samples_.empty() && now - samples_.back().t < std::chrono::milliseconds(500)) return;
  const EngineStats st = engine_.stats();
  samples_.push_back({now, st.prefill_tokens, st.generated_tokens});
  while (samples_.size() > 2 && now - samples_[1].t > std::chrono::seconds(10)) {
    samples_.pop_front();
  }
  const Sample& a = samples_.front();
  const double dt = std::chrono::duration<double>(now - a.t).count();
  counters_.prefill_rate = dt > 0 ? (double)(st.prefill_tokens - a.prefill) / dt : 0;
  counters_.generation_rate = dt > 0 ? (double)(st.generated_tokens - a.generated) / dt : 0;
}

void EngineWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    RunTasks(lock);
    TakeSample();
    if (stop_) break;
    if (!engine_.HasWork()) {
      cv_.wait_for(lock, std::chrono::seconds(1),
                   [&] { return stop_ || !tasks_.empty() || !cancels_.empty(); });
      continue;
    }
    lock.unlock();
    absl::StatusOr<std::vector<SequenceOutput>> outs = engine_.Step();
    if (outs.ok()) {
      Dispatch(*outs);
    } else {
      FailAll(outs.status());
    }
    lock.lock();
  }
  lock.unlock();
  FailAll(absl::UnavailableError("the server is shutting down"));
}

}  // namespace pinfer::server
