#include "engine/scheduler.h"

#include <algorithm>
#include <span>

#include "absl/strings/str_cat.h"

namespace pinfer {

void Scheduler::Enqueue(Sequence* seq) { waiting_.push_back(seq); }

absl::Status Scheduler::Fork(Sequence* parent, Sequence* child) {
  child->n_computed = parent->n_computed;
  child->n_cached_prompt = parent->n_cached_prompt;
  if (absl::Status s = cache_.Fork(parent->id, child->id); !s.ok()) return s;
  running_.push_back(child);
  return absl::OkStatus();
}

void Scheduler::MarkComputed(const std::vector<ScheduledChunk>& chunks) {
  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    seq->n_computed = c.start + c.count;
    cache_.MarkComputed(
        seq->id, std::span<const int32_t>(seq->tokens).first(static_cast<size_t>(seq->n_computed)));
  }
}

void Scheduler::Remove(Sequence* seq) {
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  if (cache_.HasSequence(seq->id)) cache_.Free(seq->id);
}

void Scheduler::Preempt(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  cache_.Free(seq->id);
  seq->n_computed = 0;
  ++preemptions_;
  waiting_.push_front(seq);
}

absl::StatusOr<ScheduledChunk> Scheduler::Reserve(Sequence* seq, int count) {
  // The caller checked BlocksNeeded against NumFreeBlocks, and the submission check keeps
  // every sequence within max_model_len, so a failure here is an internal error.
  if (absl::Status s = cache_.Append(seq->id, count); !s.ok()) {
    return absl::InternalError(absl::StrCat("scheduler: reserving ", count,
                                            " KV slots for sequence ", seq->id,
                                            " failed: ", s.message()));
  }
  const bool sample = seq->n_computed + count == static_cast<int>(seq->tokens.size());
  return ScheduledChunk{seq, seq->n_computed, count, sample};
}

bool Scheduler::MakeRoom(size_t i, int count) {
  Sequence* seq = running_[i];
  while (cache_.BlocksNeeded(seq->id, count) > cache_.NumFreeBlocks()) {
    Sequence* victim = running_.back();
    Preempt(victim);
    if (victim == seq) return false;
  }
  return true;
}

int64_t Scheduler::GrowthBlocks() const {
  if (config_.admission_headroom <= 0) return 0;
  int64_t blocks = 0;
  for (const Sequence* r : running_) {
    const int final_len = r->prompt_len + r->params.max_tokens;
    const int left = std::min(config_.admission_headroom, final_len - cache_.num_tokens(r->id));
    if (left > 0) blocks += cache_.BlocksToGrow(r->id, left) * (1 + r->fork_pending);
  }
  return blocks;
}

absl::StatusOr<bool> Scheduler::AdmitHead(int budget, std::vector<ScheduledChunk>* out) {
  Sequence* seq = waiting_.front();
  // Running sequences, the forks they still owe, this one and its own forks.
  int seats = static_cast<int>(running_.size()) + 1 + seq->fork_pending;
  for (const Sequence* r : running_) seats += r->fork_pending;
  if (seats > config_.max_num_seqs) return false;
  if (!cache_.AddSequence(seq->id).ok()) return false;
  seq->n_computed = cache_.MatchPrefix(seq->id, seq->tokens);
  if (seq->n_computed > 0 && seq->n_computed <= seq->prompt_len) {
    seq->n_cached_prompt = seq->n_computed;
  }
  const int count = std::min(seq->uncomputed(), budget);
  if (cache_.BlocksNeeded(seq->id, count) + GrowthBlocks() > cache_.NumFreeBlocks()) {
    cache_.Free(seq->id);  // the head waits: first come, first served
    seq->n_computed = 0;
    kv_blocked_ = true;
    return false;
  }
  waiting_.pop_front();
  running_.push_back(seq);
  auto chunk = Reserve(seq, count);
  if (!chunk.ok()) return chunk.status();
  out->push_back(*chunk);
  return true;
}

absl::StatusOr<std::vector<ScheduledChunk>> Scheduler::Schedule() {
  std::vector<ScheduledChunk> out;
  int budget = config_.max_num_batched_tokens;
  kv_blocked_ = false;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* seq = running_[i];
    const int count = std::min(seq->uncomputed(), budget);
    if (count <= 0) continue;
    if (!MakeRoom(i, count)) break;  // seq was the newest and got preempted itself
    auto chunk = Reserve(seq, count);
    if (!chunk.ok()) return chunk.status();
    out.push_back(*chunk);
    budget -= count;
  }
  while (budget > 0 && !waiting_.empty()) {
    const size_t before = out.size();
    auto admitted = AdmitHead(budget, &out);
    if (!admitted.ok()) return admitted.status();
    if (!*admitted) break;
    budget -= out[before].count;
  }
  return out;
}

}  // namespace pinfer
