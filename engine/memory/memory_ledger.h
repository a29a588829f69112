// The memory ledger: what every line of memory costs, computed before the first request, and
// the KV pool that is left. See DESIGN.md, "The memory ledger". All sizes are in bytes.
//
// ComputeLedger is the one place this arithmetic lives: `plan` calls it before anything is
// loaded, the engine calls it at start to size its pool (and refuses to start when it says
// the configuration does not fit), and the memory report prints its lines beside what the
// backend allocated.
//
// Lines:
//   weights    exact bytes of the tensors, per storage type (fixed at load);
//   KV cache   the pool in whole blocks, a block costing what kvcache's KvBlockBytes says
//              (KvSequenceCostFor): 2 (K and V) x layers per block x block_size x
//              KvRowBytes(kv_dtype, kv_heads x head_dim); a sequence costs what kvcache's
//              KvSequenceBlocks says (a sliding-window layer group at most its window's
//              blocks, kv_layer_groups.h);
//   workspace  on the CPU, exactly the buffers of CpuWorkspaceLayout (cpu_workspace_layout.h)
//              plus the engine's logits rows; on a device, the backend's measured step buffers;
//   reserve    an allowance for what grows outside the lines (request and sequence
//              bookkeeping, the sampler, the HTTP layer; a device: its context and
//              libraries, measured when larger). The process's binary, libraries and heap at
//              start are not a line: they are resident before the available memory is read,
//              so they are not counted against it twice; the memory report measures them;
//   graphs     device memory set aside for captured CUDA graphs (device backends; 0 otherwise).
//
// The KV pool (PoolBound says which bound chose it):
//   --kv-cache-memory given      exactly that many whole blocks; the configuration fits when
//                                weights + workspace + reserve + graphs + pool is at most the
//                                memory available (when known);
//   otherwise, on the host       max_num_seqs sequences of max_model_len (the work asked),
//                                capped by budget - weights - workspace - reserve - graphs,
//                                where budget = memory_utilization x available memory (or the
//                                budget given, `plan --memory`);
//   otherwise, on a device       all of budget - weights - workspace - reserve - graphs (the
//                                device is the engine's alone: vLLM gives the pool every
//                                block the budget leaves, and more blocks mean more
//                                sequences at once).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "kvcache/kv_cache.h"
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

// Defaults shared by the engine (EngineConfig), `plan` and the ledger.
inline constexpr int kDefaultBlockSize = 16;
inline constexpr int kDefaultMaxNumSeqs = 16;
inline constexpr int kDefaultMaxNumBatchedTokens = 512;
inline constexpr double kDefaultMemoryUtilization = 0.9;
inline constexpr uint64_t kDefaultCpuReserveBytes = 64ull << 20;
inline constexpr uint64_t kDefaultDeviceReserveBytes = 1ull << 30;
// max_model_len when none is given: the model's context length, at most this.
inline constexpr int kDefaultMaxModelLenCap = 4096;
int DefaultMaxModelLen(int context_length);

// Which bound chose the KV pool's size.
enum class PoolBound {
  kWork,         // max_num_seqs sequences of max_model_len: all the work asked can use
  kBudget,       // the memory budget was smaller than that
  kExplicit,     // --kv-cache-memory
  kWholeBudget,  // a device: all that the budget leaves after the other lines (vLLM's)
};

// Everything the ledger is computed from besides the model: the engine's limits (vLLM's
// names), the device, and the memory there is.
struct LedgerOptions {
  // Limits.
  KvDtype kv_dtype = KvDtype::kF16;
  KvLayout kv_layout = KvLayout::kPaged;  // contiguous: one group, every layer full length
  int block_size = kDefaultBlockSize;     // tokens per KV block (contiguous: max_model_len)
  int64_t max_model_len = 0;              // tokens per sequence; 0: the model's context_length
  int max_num_seqs = kDefaultMaxNumSeqs;  // sequences running at once (logits rows per step)
  int64_t max_num_batched_tokens = kDefaultMaxNumBatchedTokens;  // tokens per forward step

  // Device. host: the CPU backend, whose workspace is CpuWorkspaceLayout for `threads`
  // threads (0: the machine's hardware threads). A device backend gives its measured step
  // buffers as workspace_floor_bytes (the line is the larger of that and an estimate).
  bool host = true;
  int threads = 0;
  uint64_t workspace_floor_bytes = 0;
  uint64_t graph_bytes = 0;  // set aside for captured CUDA graphs (0: none; line not shown)
  uint64_t reserve_bytes = kDefaultCpuReserveBytes;  // runtime reserve

  // Memory. available_bytes: what the device has (host: available RAM within any cgroup
  // limit; device: free memory), 0 when unknown; available_source says where it came from
  // ("MemAvailable", "the memory cgroup's limit", ...). The budget is budget_bytes when given,
  // else memory_utilization x available_bytes. kv_cache_memory > 0 sizes the pool directly.
  uint64_t available_bytes = 0;
  std::string available_source;
  double memory_utilization = kDefaultMemoryUtilization;
  uint64_t budget_bytes = 0;
  uint64_t kv_cache_memory = 0;
  // How the user sets the budget, as messages name it ("raise --memory to at least ...").
  std::string budget_option = "--memory";
};

// What the KV cache costs per block and per max_model_len sequence: the one place the ledger
// computes KV bytes, asking kvcache's rules (KvBlockBytes, by which the cache sizes its
// blocks, and KvSequenceBlocks, the most blocks a sequence's tables hold) for a cache of this
// model, its sliding windows, format, layout and block_size (token slots per block), when a
// step appends at most max_chunk positions (max_num_batched_tokens). A window layer group
// costs at most WindowBlocksBound(window, block_size, chunk) blocks per table, as vLLM counts
// a sliding-window layer (window - 1 + max_num_batched_tokens tokens); full layers
// ceil(max_model_len / block_size).
// One layer group's part of a max_model_len sequence and, in the ledger, of the pool.
struct KvGroupLine {
  int window = 0;  // 0: full attention; else the sliding window in tokens
  int layers = 0;  // the model's layers in the group
  int tables = 0;  // block tables per sequence
  // The group's share of blocks_per_sequence (KvSequenceGroupBlocks: the groups add up).
  int64_t blocks_per_sequence = 0;
  // Ledger only: at max_concurrency sequences of max_model_len, blocks_per_sequence x
  // max_concurrency blocks of the pool, and their bytes.
  int64_t pool_blocks = 0;
  uint64_t pool_bytes = 0;
};

struct KvSequenceCost {
  uint64_t bytes_per_block = 0;  // KvBlockBytes
  // A token in every layer: bytes_per_block x tables / block_size = 2 x layers x KvRowBytes.
  uint64_t bytes_per_token = 0;
  int tables = 1;                   // block tables per sequence (1 without windows)
  int64_t blocks_per_sequence = 0;  // KvSequenceBlocks(max_model_len, max_chunk)
  // The same sequence with every window ignored: ceil(max_model_len / block_size) x tables.
  int64_t blocks_per_sequence_full = 0;
  std::string layer_groups;         // KvLayerGroups::Describe() when there are windows, else empty
  std::vector<KvGroupLine> groups;  // one per layer group (full attention first)
};
// The cache configuration the ledger costs (model widths and windows, format, layout, block
// size, max_model_len), as the engine creates its cache.
KvCacheConfig LedgerKvConfig(const ModelConfig& c, KvDtype dtype, KvLayout layout, int block_size,
                             int64_t max_model_len);
absl::StatusOr<KvSequenceCost> KvSequenceCostFor(const KvCacheConfig& kc, int64_t max_chunk);

// One part of the workspace line (a sub-line of the ledger's table).
struct WorkspacePart {
  std::string name;  // "activations", "matmul scratch", "attention scratch", "logits", ...
  uint64_t bytes = 0;
};

// The workspace line's parts for these options: on the host, the sums of CpuWorkspaceLayout's
// sub-lines and the engine's logits rows (min(max_num_seqs, max_num_batched_tokens) x n_vocab
// float32); on a device, the same as an estimate, or the measured floor when larger.
std::vector<WorkspacePart> WorkspaceParts(const ModelConfig& c, const LedgerOptions& o);

struct MemoryLedger {
  // Inputs, as resolved (max_model_len and threads filled in).
  std::string model_name, weight_format;
  KvDtype kv_dtype = KvDtype::kF16;
  int block_size = 0;
  int64_t max_model_len = 0;
  int max_num_seqs = 0;
  int64_t max_num_batched_tokens = 0;
  bool host = true;
  int threads = 0;
  uint64_t available_bytes = 0;  // 0: unknown
  std::string available_source;
  double memory_utilization = 0;
  uint64_t budget_bytes = 0;  // what the lines may add up to (explicit pool: their sum)
  std::string budget_source;  // "0.90 of 21.50 GiB available (MemAvailable)", "--memory 16.00 GiB"
  std::string budget_option = "--memory";

  // Lines.
  std::vector<WeightLine> weights;
  uint64_t weights_bytes = 0;
  std::vector<WorkspacePart> workspace;
  uint64_t workspace_bytes = 0;
  uint64_t reserve_bytes = 0;
  uint64_t graph_bytes = 0;  // CUDA graphs (0 without them)
  KvLayout kv_layout = KvLayout::kPaged;
  uint64_t kv_bytes_per_token = 0;  // a token in every layer
  uint64_t kv_bytes_per_block = 0;  // kv_bytes_per_token x block_size / kv_tables
  int kv_tables = 1;                // block tables per sequence (layer groups' tables)
  std::string kv_layer_groups;      // with sliding windows: the groups; else empty

  // The pool and what it holds.
  PoolBound pool_bound = PoolBound::kWork;
  uint64_t kv_pool_bytes = 0;  // whole blocks only
  int64_t kv_pool_blocks = 0;
  int64_t kv_pool_tokens = 0;            // kv_pool_blocks x block_size / kv_tables
  int64_t blocks_per_sequence = 0;       // KvSequenceCost::blocks_per_sequence
  int64_t blocks_per_sequence_full = 0;  // the same with the windows ignored
  int64_t max_concurrency = 0;           // max_model_len sequences that fit at once
  int64_t max_model_len_fit = 0;  // longest max_model_len one sequence can have (KvLongestSequence)
  // How the pool divides between the layer groups at max_concurrency sequences of
  // max_model_len. The pool is one pool of equal blocks that every group draws from (vLLM's
  // hybrid allocator), not fixed per-group pools: a group's figure is what those sequences
  // hold at most, and kv_blocks_spare (kv_pool_blocks - the groups' blocks) is no group's:
  // shorter sequences, prefix-cache entries, or any group's growth take it.
  std::vector<KvGroupLine> kv_groups;
  int64_t kv_blocks_spare = 0;
  bool fits = false;    // the pool holds one max_model_len sequence, and all lines fit
  std::string message;  // when !fits: needed, available, the longest that fits

  uint64_t fixed_bytes() const;  // weights + workspace + reserve + graphs
  uint64_t total_bytes() const;  // fixed_bytes() + kv_pool_bytes
  // "sized for 16 sequences of max_model_len 4096", "capped by 0.90 of 21.50 GiB available
  // (MemAvailable)", "--kv-cache-memory 4.00 GiB", "the whole budget after the other lines
  // (0.90 of 139.00 GiB available (free device memory)), as vLLM sizes it".
  std::string PoolBoundText() const;

  std::string ToText() const;  // a table for people
  std::string ToJson() const;  // one JSON object (keys as the fields above)
};

// InvalidArgument for unusable settings (no budget and no available memory, block_size < 1,
// a KV format the model's rows do not suit, max_num_batched_tokens < max_num_seqs, ...). A
// configuration that does not fit is not an error: the ledger says fits = false and why.
absl::StatusOr<MemoryLedger> ComputeLedger(const PlanInput& input, const LedgerOptions& options);

}  // namespace pinfer
