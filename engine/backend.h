// The interface between the engine (scheduler, KV accounting) and whatever runs the model's
// arithmetic. The CPU backend is the reference; a device backend implements the same.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

// Tokens from one or more sequences, run through the model in one step.
// Each sequence's tokens are contiguous and in position order, and the KV cache already has
// slots for them (KvCache::Append); a token at position p attends to positions [0, p].
struct ForwardBatch {
  std::vector<int32_t> tokens;      // [n]
  std::vector<int32_t> positions;   // [n]
  std::vector<SeqId> seq_ids;       // [n]
  std::vector<int32_t> logit_rows;  // indices into [0, n) whose logits are wanted, in order
  int size() const { return static_cast<int>(tokens.size()); }
  void Add(int32_t token, int32_t pos, SeqId seq, bool want_logits) {
    if (want_logits) logit_rows.push_back(size());
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
  }
};

// The checks every backend makes before a step: at most max_tokens tokens, each id inside a
// vocabulary of n_vocab, each position p in [0, cache.num_tokens(seq)) with every block table
// of the sequence reaching it and holding its block (a sliding-window table lets the blocks
// before its window go), no two tokens naming the same (sequence, position) (backends write
// a step's K/V rows in parallel), and logit_rows increasing inside [0, n). InvalidArgument
// (size, ids, a slot named twice, logit rows) or FailedPrecondition (KV slots), naming the
// token, sequence and position.
absl::Status ValidateBatch(const ForwardBatch& batch, const KvCache& cache, int n_vocab,
                           int max_tokens);

// The host memory holding the weights a backend reads (see Backend::Weights).
struct WeightResidency {
  uint64_t bytes = 0;     // the weights' pages
  uint64_t resident = 0;  // of those, in memory now
  // Of bytes, pages of the model file(s) mapped into memory: unless locked, the OS may drop
  // them under memory pressure and read them back from the file mid-conversation.
  uint64_t mapped = 0;
  bool locked = false;  // mlock()ed (--mlock): never dropped
  // Of bytes, the backend's own copy of matrices it repacked at load (engine/cpu/repack.h);
  // their file pages were released.
  uint64_t repacked = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Writes each token's K/V into the cache and logits[logit_rows.size() x n_vocab].
  virtual absl::Status Forward(const ForwardBatch& batch, KvCache& cache, float* logits) = 0;
  // Bytes of working memory the backend holds for a step of max_tokens tokens.
  virtual uint64_t WorkspaceBytes() const = 0;
  // Called before the ledger is computed, with the engine's limits: a device backend
  // allocates now every buffer whose size follows them (block tables for max_num_seqs
  // sequences of max_model_len, ...), so WorkspaceBytes() counts them before the KV pool
  // takes the rest and no step has to grow them later; a host backend lays its workspace out
  // (the ledger computes the same bytes) and allocates it in Commit.
  virtual absl::Status ReserveForLimits(int max_num_seqs, int max_model_len, int block_size) {
    (void)max_num_seqs;
    (void)max_model_len;
    (void)block_size;
    return absl::OkStatus();
  }

  // Called once the ledger says the configuration fits, before the KV pool is made: commit
  // the memory the backend will use, so that it is resident from now on (the CPU: the
  // weights' pages faulted in, the workspace allocated with every page written), locking it
  // (and the pool MakeKvStorage makes) when lock_memory (--mlock). Errors name the line and,
  // for a refused lock, the memlock limit.
  virtual absl::Status Commit(bool lock_memory) {
    (void)lock_memory;
    return absl::OkStatus();
  }
  // What Commit did, for the start-up line ("" when nothing).
  virtual std::string CommitSummary() const { return ""; }
  // The weights' host pages (host backends; a device backend keeps the default: none).
  virtual WeightResidency Weights() const { return {}; }

  // Device backends (a host backend keeps the defaults):
  // Bytes of device memory the engine may budget from, measured when the backend started
  // (before it loaded weights); 0 means "a host backend: use available RAM".
  virtual uint64_t DetectedMemory() const { return 0; }
  // The runtime reserve the backend measured (context, library workspaces, allocator slack);
  // 0: use the configured reserve. The engine takes the larger of the two.
  virtual uint64_t MeasuredReserve() const { return 0; }
  // Storage for a KV pool of num_blocks x block_bytes that Forward can read and write;
  // nullptr: host memory (KvCache allocates it). The CPU backend commits its own.
  virtual absl::StatusOr<std::unique_ptr<KvStorage>> MakeKvStorage(size_t block_bytes,
                                                                   int64_t num_blocks) {
    (void)block_bytes;
    (void)num_blocks;
    return std::unique_ptr<KvStorage>();
  }

  // CUDA graphs (device backends; a host backend keeps the defaults, and the engine calls
  // none of these under EngineConfig::enforce_eager):
  // Device memory to set aside in the ledger, before the KV pool is sized, for the graphs
  // CaptureGraphs will make for steps of up to max_num_seqs tokens.
  virtual uint64_t GraphReserveBytes(int max_num_seqs) const {
    (void)max_num_seqs;
    return 0;
  }
  // Captures the forward pass for steps of up to max_num_seqs tokens that all want logits
  // (decode), once the KV pool exists and a step has run; Forward then replays them.
  virtual absl::Status CaptureGraphs(KvCache& cache, int max_num_seqs) {
    (void)cache;
    (void)max_num_seqs;
    return absl::OkStatus();
  }
  // Device memory the captured graphs took (measured); 0 without graphs.
  virtual uint64_t GraphBytes() const { return 0; }
};

}  // namespace pinfer
