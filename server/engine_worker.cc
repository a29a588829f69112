#include "server/engine_worker.h"

#include <algorithm>
#include <future>

namespace pinfer::server {

using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kStepTimes = 4096;  // steps whose start is remembered (queue times)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void RequestStream::Take(std::vector<SequenceOutput>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  while (!queue_.empty()) {
    out->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

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

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unfinished_ == 0 || !status_.ok();
}

// Always on one thread at a time (the engine thread, or Submit's before the stream is
// shared). After the last notification the notifier is dropped: it may hold what holds
// this stream.
void RequestStream::Notify(bool last) {
  cv_.notify_all();
  if (!notify_) return;
  if (!last) return notify_();
  std::function<void()> fn = std::move(notify_);
  notify_ = nullptr;
  fn();
}

void RequestStream::Accept(int64_t id) {
  id_.store(id);
  Notify(/*last=*/false);
}

void RequestStream::Push(const SequenceOutput& o) {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(o);
    if (o.finished && unfinished_ > 0) --unfinished_;
    last = unfinished_ == 0;
  }
  Notify(last);
}

void RequestStream::Fail(absl::Status s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status_.ok() || unfinished_ == 0) return;  // already over
    status_ = std::move(s);
  }
  Notify(/*last=*/true);
}

EngineWorker::EngineWorker(Engine& engine)
    : engine_(engine), ledger_json_(engine.ledger().ToJson()), step_at_(kStepTimes) {
  published_ = Clock::now() - std::chrono::hours(1);
  Publish(/*force=*/true);
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

void EngineWorker::Submit(GenerationRequest request, std::shared_ptr<RequestStream> stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_.ok() && !stop_) {
      submissions_.push_back({std::move(request), stream, Clock::now()});
      stream = nullptr;
    }
  }
  if (stream) {
    stream->Fail(absl::UnavailableError("the server is shutting down"));
    return;
  }
  cv_.notify_all();
}

absl::StatusOr<std::shared_ptr<RequestStream>> EngineWorker::Submit(GenerationRequest request) {
  auto stream = std::make_shared<RequestStream>(request.n);
  auto decided = std::make_shared<std::promise<void>>();
  auto once = std::make_shared<std::once_flag>();
  stream->SetNotify([decided, once] { std::call_once(*once, [&] { decided->set_value(); }); });
  Submit(std::move(request), stream);
  decided->get_future().wait();
  if (!stream->accepted()) return stream->status();
  return stream;
}

void EngineWorker::Cancel(std::shared_ptr<RequestStream> stream) {
  stream->cancel_requested_.store(true);
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(std::move(stream));
  }
  cv_.notify_all();
}

void EngineWorker::Cancel(int64_t request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_ids_.push_back(request_id);
  }
  cv_.notify_all();
}

void EngineWorker::Close(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_.ok()) return;
    closed_ = std::move(status);
    close_pending_ = true;
  }
  cv_.notify_all();
}

WorkerSnapshot EngineWorker::snapshot() const {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  return snapshot_;
}

// Engine thread: hands one submission to the engine.
void EngineWorker::AddOne(Submission s) {
  if (s.stream->cancel_requested_.load()) {
    s.stream->Fail(absl::CancelledError("the request was cancelled"));
    std::lock_guard<std::mutex> l(mu_);
    ++counters_.requests_cancelled;
    return;
  }
  const int64_t prompt_tokens = static_cast<int64_t>(s.request.prompt.size());
  absl::StatusOr<int64_t> rid = engine_.AddRequest(std::move(s.request));
  {
    std::lock_guard<std::mutex> l(mu_);
    if (rid.ok()) {
      ++counters_.requests_accepted;
      counters_.prompt_tokens += prompt_tokens;
    } else {
      ++counters_.requests_rejected;
    }
  }
  if (!rid.ok()) return s.stream->Fail(rid.status());
  streams_[*rid] = s.stream;
  timing_[*rid].arrival = s.posted;
  s.stream->Accept(*rid);
}

void EngineWorker::CancelOne(const std::shared_ptr<RequestStream>& stream) {
  const int64_t rid = stream->id();
  auto it = rid >= 0 ? streams_.find(rid) : streams_.end();
  if (it == streams_.end()) return;  // not yet added (AddOne drops it), or already over
  engine_.Cancel(rid);
  streams_.erase(it);
  timing_.erase(rid);
  ++serving_.finished_by_reason["abort"];
  stream->Fail(absl::CancelledError("the request was cancelled"));
  std::lock_guard<std::mutex> l(mu_);
  ++counters_.requests_cancelled;
}

// Runs queued work with the lock released around it (it may take mu_): cancellations first
// (so a cancelled submission never reaches the engine), then submissions, then tasks.
bool EngineWorker::RunTasks(std::unique_lock<std::mutex>& lock) {
  bool ran = false;
  while (!tasks_.empty() || !cancels_.empty() || !cancel_ids_.empty() || !submissions_.empty() ||
         close_pending_) {
    std::vector<std::shared_ptr<RequestStream>> cancels;
    cancels.swap(cancels_);
    std::vector<int64_t> cancel_ids;
    cancel_ids.swap(cancel_ids_);
    std::deque<Submission> submissions;
    submissions.swap(submissions_);
    std::deque<std::function<void()>> tasks;
    tasks.swap(tasks_);
    const bool close = close_pending_;
    const absl::Status closed = closed_;
    close_pending_ = false;
    ran = true;
    lock.unlock();
    for (const auto& s : cancels) CancelOne(s);
    for (int64_t rid : cancel_ids) {
      if (auto it = streams_.find(rid); it != streams_.end()) CancelOne(it->second);
    }
    for (Submission& s : submissions) {
      if (close) {
        s.stream->Fail(closed);
      } else {
        AddOne(std::move(s));
      }
    }
    if (close) FailAll(closed);
    for (auto& t : tasks) t();
    lock.lock();
  }
  return ran;
}

// Time to first token and queue time at a request's first token; the gaps between a
// completion's tokens.
void EngineWorker::Observe(Timing& t, const SequenceOutput& o, Clock::time_point now) {
  if (o.new_tokens.empty()) return;
  if (!t.first_token) {
    t.first_token = true;
    serving_.time_to_first_token.Observe(Seconds(now - t.arrival));
    serving_.cached_prompt_tokens += o.cached_prompt_tokens;
    const int64_t ago = engine_.stats().steps - o.admitted_step;
    if (o.admitted_step >= 0 && ago >= 1 && ago <= static_cast<int64_t>(kStepTimes)) {
      const Clock::time_point admitted = step_at_[o.admitted_step % kStepTimes];
      serving_.request_queue_time.Observe(std::max(0.0, Seconds(admitted - t.arrival)));
    }
  }
  auto last = t.last_token.find(o.index);
  if (last != t.last_token.end()) {
    const double gap = Seconds(now - last->second) / static_cast<double>(o.new_tokens.size());
    for (size_t i = 0; i < o.new_tokens.size(); ++i) serving_.inter_token_latency.Observe(gap);
  }
  t.last_token[o.index] = now;
  if (o.finished && t.reason != "length") t.reason = FinishReasonName(o.reason);
}

void EngineWorker::Dispatch(const std::vector<SequenceOutput>& outs) {
  const Clock::time_point now = Clock::now();
  for (const SequenceOutput& o : outs) {
    auto it = streams_.find(o.request_id);
    if (it == streams_.end()) continue;
    std::shared_ptr<RequestStream> stream = it->second;
    if (stream->finished()) continue;
    Timing& t = timing_[o.request_id];
    Observe(t, o, now);
    stream->Push(o);
    if (stream->finished()) {
      serving_.e2e_request_latency.Observe(Seconds(now - t.arrival));
      ++serving_.finished_by_reason[t.reason.empty() ? "stop" : t.reason];
      timing_.erase(o.request_id);
      streams_.erase(o.request_id);
    }
  }
}

void EngineWorker::FailAll(const absl::Status& s) {
  std::map<int64_t, std::shared_ptr<RequestStream>> streams;
  streams.swap(streams_);
  for (auto& [rid, stream] : streams) {
    engine_.Cancel(rid);
    stream->Fail(s);
    ++serving_.finished_by_reason["abort"];
  }
  timing_.clear();
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
  std::lock_guard<std::mutex> lock(mu_);
  counters_.prefill_rate = dt > 0 ? (double)(st.prefill_tokens - a.prefill) / dt : 0;
  counters_.generation_rate = dt > 0 ? (double)(st.generated_tokens - a.generated) / dt : 0;
}

// Engine thread: copies the figures readers want into the snapshot (force: now; else at
// most every 100 ms).
void EngineWorker::Publish(bool force) {
  const auto now = Clock::now();
  if (!force && now - published_ < std::chrono::milliseconds(100)) return;
  published_ = now;
  WorkerSnapshot s;
  s.stats = engine_.stats();
  s.kv = engine_.KvReport();
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.counters = counters_;
    s.submissions_queued = static_cast<int64_t>(submissions_.size());
  }
  s.serving = serving_;
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  snapshot_ = std::move(s);
}

void EngineWorker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const bool ran = RunTasks(lock);
    lock.unlock();
    TakeSample();
    const bool busy = engine_.HasWork();
    // Submissions and cancellations show at once; steps at most every 100 ms.
    Publish(/*force=*/ran || !busy);
    lock.lock();
    if (stop_) break;
    if (!busy) {
      cv_.wait_for(lock, std::chrono::seconds(1), [&] {
        return stop_ || !tasks_.empty() || !cancels_.empty() || !cancel_ids_.empty() ||
               !submissions_.empty() || close_pending_;
      });
      continue;
    }
    lock.unlock();
    step_at_[engine_.stats().steps % kStepTimes] = Clock::now();
    absl::StatusOr<std::vector<SequenceOutput>> outs = engine_.Step();
    if (outs.ok()) {
      Dispatch(*outs);
    } else {
      FailAll(outs.status());
    }
    lock.lock();
  }
  std::deque<Submission> left;
  left.swap(submissions_);
  lock.unlock();
  const absl::Status stopping = absl::UnavailableError("the server is shutting down");
  for (Submission& s : left) s.stream->Fail(stopping);
  FailAll(stopping);
  Publish(/*force=*/true);
}

}  // namespace pinfer::server
