// Continuous batching over a block-paged KV cache.
//
// Each step takes the decodes (or remaining prefill chunks) of running sequences oldest
// first, then admits waiting sequences first come, first served, up to max_num_batched_tokens
// tokens and max_num_seqs sequences. A sequence is admitted only when the pool has blocks for
// its next chunk; when a running sequence cannot get a block, the most recently admitted
// sequence is preempted: its blocks are freed and it waits at the head of the queue, to be
// recomputed from its tokens later (with prefix caching, its full blocks stay cached until
// evicted, so re-admission usually recomputes little). Nothing ever runs out of memory
// mid-step.
//
// Admission keeps headroom: a waiting sequence is admitted only if, after its chunk, the pool
// still has the blocks the running sequences need for their next `admission_headroom` tokens
// (each capped at what it may still generate). Admitting on the prompt alone, as vLLM does,
// fills the pool with prompts and then preempts as soon as their outputs grow.
//
// Blocks are counted per layer group by the cache (KvCache::BlocksNeeded for a step's chunk,
// BlocksToGrow for the headroom): a sliding-window group's tables stop growing at their window
// (at most ceil((window + block_size - 1) / block_size) blocks each while decoding), so a long
// sequence of a window model costs the pool only its full-attention layers' growth.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sequence.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

struct SchedulerConfig {
  int max_num_seqs = 16;
  int max_num_batched_tokens = 512;
  int admission_headroom = 32;  // tokens of growth per running sequence; 0: none
};

// `count` tokens of `seq` starting at `start` run this step; the KV cache has their slots.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int start = 0;
  int count = 0;
  bool sample = false;  // the chunk reaches the sequence's last token: sample the next one
  // A decode: one generated token computed, the next sampled. Every other chunk is prefill
  // (a prompt, or a recompute after preemption). Fixed when scheduled: sampling later in the
  // step does not change it.
  bool is_decode() const { return count == 1 && sample && start >= seq->prompt_len; }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, KvCache& cache) : config_(config), cache_(cache) {}

  void Enqueue(Sequence* seq);  // waits at the back of the queue
  // A child of a running parent (the engine set its tokens to the parent's computed ones)
  // shares the parent's blocks and progress and joins the running set; the cache's error
  // (max_num_seqs live) otherwise.
  absl::Status Fork(Sequence* parent, Sequence* child);
  // Plans one step and reserves its KV slots. An error means the cache broke an invariant
  // the scheduler relies on (a bug, reported rather than ignored).
  absl::StatusOr<std::vector<ScheduledChunk>> Schedule();
  // The step's forward pass ran: each chunk's tokens now hold K/V (n_computed advances and
  // the cache hashes the newly full blocks for the prefix cache).
  void MarkComputed(const std::vector<ScheduledChunk>& chunks);
  // Removes a sequence wherever it is and frees its blocks.
  void Remove(Sequence* seq);

  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int64_t preemptions() const { return preemptions_; }
  // The last Schedule() left the head of the queue waiting for KV blocks (not for a seat
  // under max_num_seqs or for token budget): the KV pool held the queue back.
  bool kv_blocked() const { return kv_blocked_; }
  const std::vector<Sequence*>& running() const { return running_; }

 private:
  // Makes room for `count` more tokens of running_[i] by preempting from the back;
  // false when running_[i] itself had to be preempted.
  bool MakeRoom(size_t i, int count);
  void Preempt(Sequence* seq);
  // Tries to admit the head of the queue with a chunk of at most `budget` tokens.
  absl::StatusOr<bool> AdmitHead(int budget, std::vector<ScheduledChunk>* out);
  absl::StatusOr<ScheduledChunk> Reserve(Sequence* seq, int count);
  // Blocks the running sequences take over their next admission_headroom tokens.
  int64_t GrowthBlocks() const;

  SchedulerConfig config_;
  KvCache& cache_;
  std::deque<Sequence*> waiting_;
  // Admission order (forks join at the back): the one record of it. MakeRoom preempts from
  // the back, the most recently admitted first.
  std::vector<Sequence*> running_;
  int64_t preemptions_ = 0;
  bool kv_blocked_ = false;
};

}  // namespace pinfer
