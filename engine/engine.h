// The public engine API: add requests, step, collect outputs, cancel, report.
//
// The engine sizes its KV pool once, at start, from the memory ledger and refuses to start
// when one max_model_len sequence cannot fit. Requests whose prompt plus max_tokens exceed
// max_model_len are refused at submission; everything admitted then runs to completion
// inside the pool (queued or preempted and recomputed, never out of memory).
// Not thread-safe: one thread drives Step (the server serialises access).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/token_vocab.h"
#include "engine/logprobs.h"
#include "engine/memory/memory_ledger.h"
#include "engine/memory/memory_report.h"
#include "engine/model/model.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

struct EngineConfig {
  KvDtype kv_dtype = KvDtype::kF16;
  KvLayout kv_layout = KvLayout::kPaged;
  int block_size = kDefaultBlockSize;
  int max_model_len = 0;  // 0: the model's context length, at most 4096
  int max_num_seqs = kDefaultMaxNumSeqs;
  int max_num_batched_tokens = kDefaultMaxNumBatchedTokens;
  int admission_headroom = 32;  // see SchedulerConfig
  bool prefix_caching = true;
  // The KV pool (memory_ledger.h): kv_cache_memory bytes when given; else max_num_seqs
  // sequences of max_model_len, capped by memory_utilization of the memory available (host:
  // available RAM within any cgroup limit; device: free device memory).
  uint64_t kv_cache_memory = 0;
  double memory_utilization = kDefaultMemoryUtilization;
  uint64_t reserve_bytes = kDefaultCpuReserveBytes;  // runtime reserve line of the ledger
  int threads = 0;                                   // 0: all hardware threads
  int max_waiting = 1024;                            // queued requests beyond this are refused
  // Lock the weights, the workspace and the KV pool in memory (mlock, llama.cpp's --mlock),
  // so the OS never drops or swaps them; start fails, naming the memlock limit, if refused.
  // Host memory only: a device backend's weights and pool are device memory (no effect).
  bool mlock = false;
  // CPU backend: repack the weights at load into the row-interleaved layout of the formats
  // whose packed kernels the kernel set has (engine/cpu/repack.h); false keeps the file's
  // layout (--no-repack, llama.cpp's flag). A device backend uploads the file's layout.
  bool repack = true;
  // Device backends: run every step eagerly instead of replaying CUDA graphs captured for
  // decode steps at start (no effect on the CPU).
  bool enforce_eager = false;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included when the model wants one
  SamplingParams params;
  int n = 1;  // completions sharing the prompt's KV blocks
  // Constrained generation (README "Grammars"): null, or a compiled grammar (CompileGrammar,
  // done by the caller, where its errors belong to the request) whose sentences every
  // completion must spell. Each completion gets its own matcher; the tokens the grammar does
  // not allow are masked before every choice; a completion ends when the grammar accepts
  // and an end-of-generation token is chosen, or as soon as the grammar allows nothing
  // more (finish reason stop, no end token added). Stop strings and max_tokens still end
  // it early; logprobs stay the raw logits' (before the mask).
  std::shared_ptr<const grammar::Grammar> grammar;
};

// What one step produced for one sequence.
struct SequenceOutput {
  int64_t request_id = 0;
  int index = 0;  // which of the request's n completions
  std::vector<int32_t> new_tokens;
  // One per new token when the request asked for logprobs (SamplingParams::logprobs >= 0):
  // the raw logits' log-softmax (engine/logprobs.h).
  std::vector<SampledLogprobs> logprobs;
  std::string new_text;  // complete UTF-8; stop strings never appear
  bool finished = false;
  FinishReason reason = FinishReason::kNone;
  int prompt_tokens = 0;
  int output_tokens = 0;
  int cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
  // The engine step (0-based, counted by EngineStats::steps) in which the sequence was first
  // admitted: the steps it waited in the queue after submission (re-admissions after a
  // preemption do not move it).
  int64_t admitted_step = -1;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t prefill_tokens = 0;    // tokens computed in prompt / recompute chunks
  int64_t forwarded_tokens = 0;  // every token through the model: prefill chunks and decodes
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t finished = 0;
  int max_running = 0;
  int running = 0;  // sequences
  int waiting = 0;
  int running_requests = 0;  // requests with a sequence running
  int waiting_requests = 0;  // requests not finished and not running (queued or preempted)
  bool kv_blocked = false;   // the last step's admission waited for KV blocks
};

class Engine {
 public:
  // backend == nullptr: the CPU backend. The model must outlive the engine. Computes the
  // memory ledger and refuses to start (ResourceExhausted, the ledger's message: needed,
  // available, the longest max_model_len that fits) when the configuration does not fit;
  // then commits the memory (Backend::Commit, the KV pool) before warm-up. Prints the pool's
  // lines to stderr (pool_summary(), unless quiet).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const Model& model, EngineConfig config,
                                                        std::unique_ptr<Backend> backend = nullptr,
                                                        bool quiet = false);
  ~Engine();

  // InvalidArgument (bad ids, too long for max_model_len, bad params) or ResourceExhausted
  // (the waiting queue is full: retry later). Returns the request id.
  absl::StatusOr<int64_t> AddRequest(GenerationRequest request);
  // AddRequest's checks of the request itself (ids, params, length, n) without adding it;
  // reads only the model and the config, so any thread may call it while another steps.
  absl::Status Validate(const GenerationRequest& request) const;
  // Runs one scheduler step and returns what each touched sequence produced.
  absl::StatusOr<std::vector<SequenceOutput>> Step();
  bool HasWork() const;
  // Drops a request's sequences and frees their blocks; false when it is unknown or done.
  bool Cancel(int64_t request_id);

  // Called with each sequence's raw logits before it samples (for --logits-out, debugging).
  using LogitsObserver =
      std::function<void(int64_t request_id, int index, const float* logits, int n_vocab)>;
  void SetLogitsObserver(LogitsObserver fn) { logits_observer_ = std::move(fn); }
  // Called once per step after the forward pass and before the computed positions are marked:
  // the cache then holds the step's most blocks (a window table lets its out-of-window blocks
  // go only after), so KvReport() there is the step's peak occupancy (run --kv-report, tests).
  using StepObserver = std::function<void(const Engine&)>;
  void SetStepObserver(StepObserver fn) { step_observer_ = std::move(fn); }

  const EngineConfig& config() const { return config_; }
  const Model& model() const { return model_; }
  const KvCache& cache() const { return *cache_; }
  const Backend& backend() const { return *backend_; }
  EngineStats stats() const;
  OccupancyReport KvReport() const { return cache_->Report(); }
  // Memory by stage (after load, warm-up, first prefill, decoding, peak concurrency): each
  // ledger line's allocated and reserved bytes and the process's resident memory.
  MemoryReport memory_report() const;

  // The ledger the pool was sized from, and the lines printed at start (the pool: tokens,
  // blocks, the bound that sized it, how it was committed; then what the backend committed).
  const MemoryLedger& ledger() const { return ledger_; }
  const std::string& pool_summary() const { return pool_summary_; }

 private:
  Engine(const Model& model, EngineConfig config);
  // logits: the sequence's row of logits_, [n_vocab], read only (forks reuse it).
  void Sample(Sequence* seq, const float* logits, SequenceOutput* out);
  // The tokens seq's grammar allows next, in mask_ (empty span: seq has no grammar); an
  // all-zero mask when it allows none. End tokens are left out under ignore_eos while the
  // grammar can continue.
  std::span<const uint64_t> GrammarMask(Sequence* seq);
  // kStop when seq's grammar took an end token or allows nothing more; kNone otherwise.
  FinishReason GrammarFinish(const Sequence& seq) const;
  void ForkChildren(Sequence* parent, const float* logits, std::vector<SequenceOutput>* outs);
  void EmitText(Sequence* seq, SequenceOutput* out);
  void Finish(Sequence* seq, FinishReason reason);
  SequenceOutput OutputFor(const Sequence& seq) const;
  // The ledger's lines now (predicted, allocated, used), resident memory and the difference.
  StageRecord Stage(std::string_view name) const;
  std::string KvGroupsNote(const OccupancyReport& kv) const;
  void RecordStages(const std::vector<ScheduledChunk>& chunks);
  ForwardBatch BuildBatch(const std::vector<ScheduledChunk>& chunks, std::vector<int>* rows);
  // Engine::Create's steps after the ledger (engine_start.cc).
  absl::Status CreateCacheAndScheduler();
  void AnnouncePool(bool quiet);
  void StartMemoryReport();
  absl::Status CommitMemory();
  absl::Status WarmUp(bool quiet);
  absl::Status ForwardScratchToken();

  const Model& model_;
  EngineConfig config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::map<int64_t, std::vector<SeqId>> requests_;
  std::vector<float> logits_;    // [min(max_num_seqs, max_num_batched_tokens) x n_vocab]
  std::string storage_summary_;  // how the KV pool was committed (KvStorage::Describe)
  uint64_t process_bytes_ = 0;   // binary, libraries, heap: measured once at start
  // Grammar-constrained requests: the vocabulary as grammars see it (built on the first such
  // request) and the scratch mask of the sequence being sampled.
  std::shared_ptr<const grammar::TokenVocabulary> grammar_vocab_;
  std::vector<uint64_t> mask_;
  LogitsObserver logits_observer_;
  StepObserver step_observer_;
  std::unique_ptr<MemoryReport> report_;
  bool seen_prefill_ = false, seen_decode_ = false;
  StageRecord peak_;  // lines at the most sequences running at once
  MemoryLedger ledger_;
  std::string pool_summary_;
  int64_t next_request_ = 1;
  SeqId next_seq_ = 1;
  EngineStats stats_;
};

}  // namespace pinfer
