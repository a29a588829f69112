// One sequence being generated: its tokens, how many of them have K/V in the cache, and
// why it finished. A request with n > 1 has n sequences (forks sharing the prompt's blocks).
//
// A sequence's progress has one owner per fact; everything else reads it:
//   tokens       its ids, the only copy: the engine writes the prompt at submission and
//                appends each sampled token; the KV cache keeps none and is handed them
//                where it hashes blocks (KvCache::MatchPrefix, KvCache::MarkComputed).
//   n_computed   how many leading tokens have K/V: only the Scheduler writes it (the
//                prefix-cache hit at admission, Scheduler::MarkComputed after each step, 0 on
//                preemption, the parent's on Scheduler::Fork).
//   KV slots     KvCache::num_tokens(id): reserved by the scheduler for a step's chunks, so
//                n_computed <= slots <= tokens.size(), equal to n_computed between steps.
//   block hashes kept by the KV cache, derived from the ids it was handed.
//   matcher      a constrained sequence's grammar state after its output tokens: the engine
//                advances it with each sampled token. Preemption frees only K/V, so the
//                matcher (like tokens and the sampler's random state) carries over to the
//                recompute unchanged; a fork starts its own from the grammar's start.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/grammar_matcher.h"
#include "engine/sampler.h"
#include "kvcache/kv_cache.h"
#include "loaders/tokenizer.h"

namespace pinfer {

enum class FinishReason { kNone, kStop, kLength, kCancelled };
const char* FinishReasonName(FinishReason r);  // "", "stop", "length", "cancelled"

struct Sequence {
  SeqId id = 0;
  int64_t request_id = 0;
  int index = 0;                // 0..n-1 within its request
  std::vector<int32_t> tokens;  // prompt, then generated tokens
  int prompt_len = 0;
  int n_computed = 0;       // leading tokens whose K/V are in the cache (the scheduler's)
  int n_cached_prompt = 0;  // prompt tokens taken from the prefix cache (the scheduler's)
  int fork_pending = 0;     // children to fork once the prompt is computed (n - 1)
  SamplingParams params;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamDecoder> decoder;
  std::unique_ptr<grammar::GrammarMatcher> matcher;  // null: unconstrained
  std::string text;                                  // decoded output so far
  size_t emitted = 0;                                // bytes of text already handed out
  FinishReason finish = FinishReason::kNone;
  int64_t first_step = -1;  // engine step (0-based) that first ran a chunk of it: admission

  int num_output() const { return static_cast<int>(tokens.size()) - prompt_len; }
  int uncomputed() const { return static_cast<int>(tokens.size()) - n_computed; }
};

}  // namespace pinfer
