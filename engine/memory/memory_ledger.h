// The memory ledger: what every line of memory costs, computed before the first request, and
// the KV pool that is left. See DESIGN.md, "The memory ledger". All sizes are in bytes.
//
// Lines:
//   weights    exact bytes of the tensors, per storage type (fixed at load);
//   KV cache   kv_bytes_per_token = 2 (K and V) x layers x KvRowBytes(kv_dtype, kv_heads x
//              head_dim), the pool rounded down to whole blocks of block_size tokens;
//   workspace  an upper bound on the float32 activations of one forward step (see
//              WorkspaceBytes below);
//   reserve    a configured allowance (runtime, allocator slack);
//   graphs     device memory set aside for captured CUDA graphs (device backends; 0 otherwise).
// kv_pool = budget - weights - workspace - reserve - graphs, rounded down to whole blocks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kvcache/kv_dtype.h"
#include "loaders/byte_size.h"  // FormatBytes, ParseBytes: the ledger's units

namespace pinfer {

// Bytes of one storage type's tensors.
struct WeightLine {
  std::string type;     // "Q4_K", "F32", ...
  int64_t tensors = 0;  // how many tensors have this type
  uint64_t bytes = 0;   // exact bytes of their data
};

// What the ledger needs to know about a model: its widths and its weights' exact bytes.
struct PlanInput {
  ModelConfig config;
  // A named shape's file type ("Q4_0", "Q4_K_M", ...); for a model, Model::WeightFormat()'s
  // storage types by size ("Q4_K 3686.4 MiB, Q6_K 512.0 MiB, ...").
  std::string weight_format;
  std::vector<WeightLine> weights;  // per storage type, largest first
  uint64_t weights_bytes() const;   // sum of weights[].bytes
};

// A named shape stored as a file type (see engine/model_shapes.h), without any file.
absl::StatusOr<PlanInput> PlanInputFromShape(std::string_view shape, std::string_view file_type);

// PlanInputFromModel / PlanInputFromModelFile (a loaded model, a model file): model_plan.h.

// Engine settings that size the KV pool and the workspace (vLLM's names).
struct LedgerOptions {
  KvDtype kv_dtype = KvDtype::kF16;
  int block_size = 16;                    // tokens per KV block
  int64_t max_model_len = 0;              // tokens per sequence; 0: the model's context_length
  int max_num_seqs = 16;                  // sequences running at once (logits rows per step)
  int64_t max_num_batched_tokens = 2048;  // tokens per forward step
  uint64_t budget_bytes = 0;              // all memory the engine may use (required, > 0)
  uint64_t reserve_bytes = 1ull << 30;    // runtime reserve
  // A device backend's measured step buffers: the workspace line is the larger of this and
  // the float32 bound below (0 on the CPU, whose buffers the bound covers).
  uint64_t workspace_floor_bytes = 0;
  // Device memory set aside for captured CUDA graphs (0: none; the line is then not shown).
  uint64_t graph_bytes = 0;
  // How the user sets the budget, as messages name it ("raise --memory to at least ...").
  std::string budget_option = "--memory";
};

// Score rows (one per query token x head pair processed at once) the workspace budgets for;
// a forward pass must not hold more than this many max_model_len-long score rows at a time.
constexpr int64_t kLedgerScoreRows = 256;

// Upper bound on a CPU forward step's float32 workspace, in bytes, for T =
// max_num_batched_tokens tokens, S = min(max_num_seqs, T) logits rows, L = max_model_len:
//   4 x T x (4 dim + 2 q_dim + 2 kv_dim + 2 n_ff + max(dim, n_ff))
//       residual x, norm output, attention projection output, FFN output (4 dim); q and the
//       attention output (2 q_dim); new k, v (2 kv_dim); gate, up (2 n_ff); and a converted
//       copy of one matmul input (max(dim, n_ff));
//   + 4 x 2 x S x n_vocab         logits and the sampler's probabilities;
//   + 4 x kLedgerScoreRows x L    attention scores;
//   + 4 x L x head_dim            RoPE cos/sin tables.
struct WorkspaceBreakdown {
  uint64_t activations = 0, logits = 0, scores = 0, rope = 0;
  uint64_t total() const { return activations + logits + scores + rope; }
};
WorkspaceBreakdown WorkspaceBytes(const ModelConfig& c, int64_t max_num_batched_tokens,
                                  int max_num_seqs, int64_t max_model_len);

struct MemoryLedger {
  // Inputs, as resolved (max_model_len filled in).
  std::string model_name, weight_format;
  KvDtype kv_dtype = KvDtype::kF16;
  int block_size = 0;
  int64_t max_model_len = 0;
  int max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  uint64_t budget_bytes = 0;
  std::string budget_option = "--memory";

  // Lines.
  std::vector<WeightLine> weights;
  uint64_t weights_bytes = 0;
  WorkspaceBreakdown workspace;
  uint64_t workspace_bytes = 0;
  uint64_t reserve_bytes = 0;
  uint64_t graph_bytes = 0;  // CUDA graphs (0 without them)
  uint64_t kv_bytes_per_token = 0;
  uint64_t kv_bytes_per_block = 0;  // kv_bytes_per_token x block_size

  // The pool and what it holds.
  uint64_t kv_pool_bytes = 0;  // whole blocks only
  int64_t kv_pool_blocks = 0;
  int64_t kv_pool_tokens = 0;       // kv_pool_blocks x block_size
  int64_t blocks_per_sequence = 0;  // ceil(max_model_len / block_size)
  int64_t max_concurrency = 0;      // max_model_len sequences that fit at once
  int64_t max_model_len_fit = 0;    // longest max_model_len one sequence can have
  bool fits = false;                // the pool holds at least one max_model_len sequence
  std::string message;              // when !fits: needed, available, the longest that fits

  std::string ToText() const;  // a table for people
  std::string ToJson() const;  // one JSON object (keys as the fields above)
};

// InvalidArgument for unusable settings (no budget, block_size < 1, a KV format the model's
// rows do not suit, max_num_batched_tokens < max_num_seqs, ...). A pool too small for one
// sequence is not an error: the ledger says fits = false and why.
absl::StatusOr<MemoryLedger> ComputeLedger(const PlanInput& input, const LedgerOptions& options);


}  // namespace pinfer
