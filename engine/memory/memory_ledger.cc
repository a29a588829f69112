// The ledger's arithmetic: plan inputs from a named shape, the workspace bound, the KV pool.
#include "engine/memory/memory_ledger.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/memory/cpu_workspace_layout.h"
#include "engine/model/model_shapes.h"
#include "kvcache/kv_cache.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

uint64_t U64(int64_t v) { return static_cast<uint64_t>(v); }

absl::Status CheckWidths(const ModelConfig& c) {
  if (c.dim <= 0 || c.n_ff <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.head_dim <= 0 || c.n_vocab <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", c.name, "' has a missing or non-positive width (dim ", c.dim, ", n_ff ", c.n_ff,
        ", layers ", c.n_layers, ", heads ", c.n_heads, ", kv_heads ", c.n_kv_heads, ", head_dim ",
        c.head_dim, ", vocab ", c.n_vocab, "); the file's metadata is incomplete"));
  }
  return absl::OkStatus();
}

// The part of a message that says what one sequence and the fixed lines cost.
std::string NeededText(const MemoryLedger& l) {
  const uint64_t seq_kv = U64(l.blocks_per_sequence) * l.kv_bytes_per_block;
  return absl::StrCat(
      "one sequence of max_model_len ", l.max_model_len, " needs ", FormatBytes(seq_kv),
      " of KV cache (", l.blocks_per_sequence, " blocks of ", l.block_size, " tokens at ",
      FormatBytes(l.kv_bytes_per_token), " per token, ", Sv(KvDtypeName(l.kv_dtype)),
      l.kv_layer_groups.empty() ? "" : absl::StrCat("; ", l.kv_layer_groups), "), and ", "weights ",
      FormatBytes(l.weights_bytes), ", workspace ", FormatBytes(l.workspace_bytes), " and reserve ",
      FormatBytes(l.reserve_bytes),
      l.graph_bytes > 0 ? absl::StrCat(" and CUDA graphs ", FormatBytes(l.graph_bytes)) : "",
      " come first");
}

// Why a pool sized from the budget cannot hold one max_model_len sequence.
std::string BudgetMessage(const MemoryLedger& l) {
  const uint64_t needed = l.fixed_bytes() + U64(l.blocks_per_sequence) * l.kv_bytes_per_block;
  std::string msg = absl::StrCat(NeededText(l), ": ", FormatBytes(needed), " in all; ");
  if (l.fixed_bytes() >= l.budget_bytes) {
    absl::StrAppend(&msg, "the budget of ", FormatBytes(l.budget_bytes),
                    " does not even cover weights, workspace and reserve, so no KV cache fits. ",
                    "Raise ", l.budget_option, " to at least ", FormatBytes(needed),
                    ", or lower --reserve / --max-num-batched-tokens, or use a smaller weight "
                    "format.");
    return msg;
  }
  absl::StrAppend(&msg, "the budget of ", FormatBytes(l.budget_bytes), " leaves ",
                  FormatBytes(l.budget_bytes - l.fixed_bytes()), " for the KV pool (",
                  l.kv_pool_tokens, " tokens). ");
  if (l.max_model_len_fit > 0) {
    absl::StrAppend(&msg, "The longest max_model_len that fits is ", l.max_model_len_fit,
                    " (--max-model-len ", l.max_model_len_fit, "); or raise ", l.budget_option,
                    " to at least ", FormatBytes(needed),
                    ", or choose a smaller --kv-dtype (q8_0, q4_0).");
  } else {
    absl::StrAppend(&msg, "Not even one block of ", l.block_size, " tokens fits; raise ",
                    l.budget_option, " to at least ", FormatBytes(needed),
                    " or lower --reserve / --max-num-batched-tokens.");
  }
  return msg;
}

// Why an explicit pool (--kv-cache-memory) cannot be had: too small for one sequence, or
// more than the memory available holds.
std::string ExplicitPoolMessage(const MemoryLedger& l) {
  std::string msg = absl::StrCat("a KV pool of ", FormatBytes(l.kv_pool_bytes),
                                 " (--kv-cache-memory, ", l.kv_pool_tokens, " tokens) with ");
  const uint64_t seq_kv = U64(l.blocks_per_sequence) * l.kv_bytes_per_block;
  if (l.kv_pool_blocks < l.blocks_per_sequence) {
    absl::StrAppend(&msg, "room for no sequence of max_model_len ", l.max_model_len,
                    ", which needs ", FormatBytes(seq_kv), ". Raise --kv-cache-memory to at least ",
                    FormatBytes(seq_kv), ", or lower --max-model-len to ", l.max_model_len_fit,
                    " or less.");
    return msg;
  }
  absl::StrAppend(&msg, "weights ", FormatBytes(l.weights_bytes), ", workspace ",
                  FormatBytes(l.workspace_bytes), " and reserve ", FormatBytes(l.reserve_bytes),
                  " needs ", FormatBytes(l.total_bytes()), ", but only ",
                  FormatBytes(l.available_bytes), " is available (", l.available_source, "). ");
  if (l.max_model_len_fit > 0) {
    absl::StrAppend(&msg, "A pool of at most ", FormatBytes(l.available_bytes - l.fixed_bytes()),
                    " fits, so the longest max_model_len that fits is ", l.max_model_len_fit,
                    " (--max-model-len ", l.max_model_len_fit,
                    " with --kv-cache-memory of at most "
                    "that). ");
  } else {
    absl::StrAppend(&msg, "Not even the weights, workspace and reserve fit. ");
  }
  absl::StrAppend(&msg, "Free memory (another engine may hold it) or lower --kv-cache-memory.");
  return msg;
}

// Checks the limits and fills in max_model_len and the thread count.
absl::Status CheckOptions(const ModelConfig& c, const LedgerOptions& o, int64_t* max_model_len) {
  if (absl::Status s = CheckWidths(c); !s.ok()) return s;
  if (o.kv_cache_memory == 0 && o.budget_bytes == 0 && o.available_bytes == 0) {
    return absl::InvalidArgumentError(
        "no memory budget given; say how much memory the engine may use (e.g. --memory 16GiB) "
        "or how large the KV pool is (--kv-cache-memory 4GiB)");
  }
  if (o.kv_cache_memory == 0 && o.budget_bytes == 0 &&
      !(o.memory_utilization > 0 && o.memory_utilization <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory utilization ", o.memory_utilization, " must be in (0, 1]"));
  }
  if (o.block_size < 1 || o.block_size > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block size ", o.block_size, " is out of range; use 1 to 65536 tokens (16 is usual)"));
  }
  *max_model_len = o.max_model_len > 0 ? o.max_model_len : DefaultMaxModelLen(c.context_length);
  if (*max_model_len <= 0) {
    return absl::InvalidArgumentError(
        "max_model_len is not set and the model states no context length; set --max-model-len");
  }
  if (o.max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_seqs is ", o.max_num_seqs, "; it must be at least 1"));
  }
  if (o.max_num_batched_tokens < o.max_num_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens (", o.max_num_batched_tokens,
                     ") is below max_num_seqs (", o.max_num_seqs,
                     "): every running sequence needs a token per step; raise the first or "
                     "lower the second"));
  }
  return absl::OkStatus();
}

// The inputs and the fixed lines.
MemoryLedger LedgerLines(const PlanInput& in, const LedgerOptions& o, int64_t max_model_len,
                         const KvSequenceCost& kv) {
  MemoryLedger l;
  l.model_name = in.config.name;
  l.weight_format = in.weight_format;
  l.kv_dtype = o.kv_dtype;
  l.block_size = o.block_size;
  l.max_model_len = max_model_len;
  l.max_num_seqs = o.max_num_seqs;
  l.max_num_batched_tokens = o.max_num_batched_tokens;
  l.host = o.host;
  l.threads = ResolveThreads(o.threads);
  l.available_bytes = o.available_bytes;
  l.available_source = o.available_source;
  l.memory_utilization = o.memory_utilization;
  l.budget_option = o.budget_option;
  l.weights = in.weights;
  l.weights_bytes = in.weights_bytes();
  l.workspace = WorkspaceParts(in.config, o);
  for (const WorkspacePart& p : l.workspace) l.workspace_bytes += p.bytes;
  l.reserve_bytes = o.reserve_bytes;
  l.graph_bytes = o.graph_bytes;
  l.kv_layout = o.kv_layout;
  l.kv_bytes_per_token = kv.bytes_per_token;
  l.kv_bytes_per_block = kv.bytes_per_block;
  l.kv_tables = kv.tables;
  l.kv_layer_groups = kv.layer_groups;
  l.blocks_per_sequence = kv.blocks_per_sequence;
  l.blocks_per_sequence_full = kv.blocks_per_sequence_full;
  l.kv_groups = kv.groups;
  return l;
}

// The longest max_model_len whose one sequence fits in pool_bytes (kvcache's search over the
// same rule), up to the longest of the model's context, max_model_len and the pool's tokens.
int64_t LongestFit(const KvCacheConfig& kc, int context_length, const MemoryLedger& l,
                   uint64_t pool_bytes) {
  const int64_t limit =
      std::max({int64_t{kc.max_model_len}, l.kv_pool_tokens, int64_t{context_length}});
  return KvLongestSequence(kc, pool_bytes, l.max_num_batched_tokens, limit);
}

// Sizes the pool by the bound that applies, and says whether it all fits.
void SizePool(const KvCacheConfig& kc, int context_length, const LedgerOptions& o,
              MemoryLedger* l) {
  const uint64_t fixed = l->fixed_bytes();
  int64_t blocks = 0;
  if (o.kv_cache_memory > 0) {
    l->pool_bound = PoolBound::kExplicit;
    blocks = static_cast<int64_t>(o.kv_cache_memory / l->kv_bytes_per_block);
    l->budget_bytes = fixed + U64(blocks) * l->kv_bytes_per_block;
  } else {
    if (o.budget_bytes > 0) {
      l->budget_bytes = o.budget_bytes;
      l->budget_source = absl::StrCat(o.budget_option, " ", FormatBytes(o.budget_bytes));
    } else {
      l->budget_bytes =
          static_cast<uint64_t>(static_cast<double>(o.available_bytes) * o.memory_utilization);
      l->budget_source = absl::StrFormat("%.2f of %s available (%s)", o.memory_utilization,
                                         FormatBytes(o.available_bytes), o.available_source);
    }
    const uint64_t left = l->budget_bytes > fixed ? l->budget_bytes - fixed : 0;
    const int64_t budget_blocks = static_cast<int64_t>(left / l->kv_bytes_per_block);
    if (!o.host) {
      // A device, as vLLM sizes it: the pool is all the budget leaves.
      l->pool_bound = PoolBound::kWholeBudget;
      blocks = budget_blocks;
    } else {
      const int64_t work_blocks = l->blocks_per_sequence * o.max_num_seqs;
      l->pool_bound = work_blocks <= budget_blocks ? PoolBound::kWork : PoolBound::kBudget;
      blocks = std::min(work_blocks, budget_blocks);
    }
  }
  l->kv_pool_blocks = blocks;
  l->kv_pool_bytes = U64(blocks) * l->kv_bytes_per_block;
  l->kv_pool_tokens = blocks * o.block_size / l->kv_tables;
  l->max_concurrency = blocks / l->blocks_per_sequence;
  l->kv_blocks_spare = blocks;
  for (KvGroupLine& g : l->kv_groups) {
    g.pool_blocks = g.blocks_per_sequence * l->max_concurrency;
    g.pool_bytes = U64(g.pool_blocks) * l->kv_bytes_per_block;
    l->kv_blocks_spare -= g.pool_blocks;
  }
  l->max_model_len_fit = LongestFit(kc, context_length, *l, l->kv_pool_bytes);
  l->fits = l->max_concurrency >= 1;
  if (l->pool_bound != PoolBound::kExplicit) {
    if (!l->fits) l->message = BudgetMessage(*l);
    return;
  }
  const bool room = l->available_bytes == 0 || l->total_bytes() <= l->available_bytes;
  if (l->fits && room) return;
  if (!room) {
    const uint64_t avail_blocks =
        l->available_bytes > fixed ? (l->available_bytes - fixed) / l->kv_bytes_per_block : 0;
    l->max_model_len_fit = LongestFit(kc, context_length, *l,
                                      std::min(avail_blocks, U64(blocks)) * l->kv_bytes_per_block);
  }
  l->fits = false;
  l->message = ExplicitPoolMessage(*l);
}

}  // namespace

int DefaultMaxModelLen(int context_length) {
  return std::min(context_length, kDefaultMaxModelLenCap);
}

uint64_t MemoryLedger::fixed_bytes() const {
  return weights_bytes + workspace_bytes + reserve_bytes + graph_bytes;
}

uint64_t MemoryLedger::total_bytes() const { return fixed_bytes() + kv_pool_bytes; }

std::string MemoryLedger::PoolBoundText() const {
  switch (pool_bound) {
    case PoolBound::kWork:
      return absl::StrCat("sized for ", max_num_seqs,
                          max_num_seqs == 1 ? " sequence" : " sequences", " of max_model_len ",
                          max_model_len);
    case PoolBound::kBudget:
      return absl::StrCat("capped by ", budget_source);
    case PoolBound::kWholeBudget:
      return absl::StrCat("the whole budget after the other lines (", budget_source,
                          "), as vLLM sizes it");
    case PoolBound::kExplicit:
      return absl::StrCat("--kv-cache-memory ", FormatBytes(kv_pool_bytes));
  }
  return "";
}

uint64_t PlanInput::weights_bytes() const {
  uint64_t total = 0;
  for (const WeightLine& w : weights) total += w.bytes;
  return total;
}

absl::StatusOr<PlanInput> PlanInputFromShape(std::string_view shape, std::string_view file_type) {
  absl::StatusOr<ModelConfig> config = NamedShape(shape);
  if (!config.ok()) return config.status();
  absl::StatusOr<FileType> ft = ParseFileType(file_type);
  if (!ft.ok()) return ft.status();
  PlanInput in;
  in.config = *config;
  in.weight_format = ft->name;
  std::map<GgmlType, WeightLine> by_type;
  for (const TensorPlan& t : PlanTensors(*config, *ft)) {
    WeightLine& line = by_type[t.type];
    line.type = std::string(GgmlTypeInfoOf(t.type).name);
    line.tensors += 1;
    line.bytes += TensorBytes({t});
  }
  for (auto& [type, line] : by_type) in.weights.push_back(line);
  std::stable_sort(in.weights.begin(), in.weights.end(),
                   [](const WeightLine& a, const WeightLine& b) { return a.bytes > b.bytes; });
  return in;
}

KvCacheConfig LedgerKvConfig(const ModelConfig& c, KvDtype dtype, KvLayout layout, int block_size,
                             int64_t max_model_len) {
  KvCacheConfig kc = KvCacheConfigFor(c, dtype);
  kc.layout = layout;
  kc.block_size = block_size;
  kc.max_model_len = static_cast<int>(max_model_len);
  return kc;
}

absl::StatusOr<KvSequenceCost> KvSequenceCostFor(const KvCacheConfig& kc, int64_t max_chunk) {
  absl::StatusOr<uint64_t> block = KvBlockBytes(kc);
  if (!block.ok()) return block.status();
  const KvLayerGroups groups = KvLayerGroupsFor(kc);
  const int64_t slots = KvBlockSlots(kc.layout, kc.block_size, kc.max_model_len);
  KvSequenceCost cost;
  cost.bytes_per_block = *block;
  cost.tables = groups.num_tables();
  cost.bytes_per_token = *block * U64(cost.tables) / U64(slots);
  cost.blocks_per_sequence = KvSequenceBlocks(kc, kc.max_model_len, max_chunk);
  cost.blocks_per_sequence_full = (kc.max_model_len + slots - 1) / slots * cost.tables;
  if (groups.has_windows()) cost.layer_groups = groups.Describe();
  const std::vector<int64_t> group_blocks = KvSequenceGroupBlocks(kc, kc.max_model_len, max_chunk);
  for (size_t g = 0; g < groups.groups.size(); ++g) {
    const KvLayerGroup& grp = groups.groups[g];
    cost.groups.push_back(
        {grp.window, static_cast<int>(grp.layers.size()), grp.tables, group_blocks[g]});
  }
  return cost;
}

std::vector<WorkspacePart> WorkspaceParts(const ModelConfig& c, const LedgerOptions& o) {
  const CpuWorkspaceLimits limits{o.max_num_batched_tokens, o.host ? ResolveThreads(o.threads) : 1};
  std::vector<WorkspacePart> parts;
  for (const CpuBufferSize& b : CpuWorkspaceLayout(c, limits)) {
    if (parts.empty() || parts.back().name != b.line) parts.push_back({std::string(b.line), 0});
    parts.back().bytes += b.bytes();
  }
  const uint64_t rows = U64(std::min<int64_t>(o.max_num_seqs, o.max_num_batched_tokens));
  parts.push_back({"logits", sizeof(float) * rows * U64(c.n_vocab)});
  if (o.host) return parts;
  // A device backend: its own buffers, measured; the host layout's activations and logits
  // estimate them until it has measured.
  uint64_t estimate = parts.front().bytes + parts.back().bytes;
  if (o.workspace_floor_bytes >= estimate) {
    return {{"device step buffers (measured)", o.workspace_floor_bytes}};
  }
  return {{"activations (estimate)", parts.front().bytes}, parts.back()};
}

absl::StatusOr<MemoryLedger> ComputeLedger(const PlanInput& in, const LedgerOptions& o) {
  int64_t max_model_len = 0;
  if (absl::Status s = CheckOptions(in.config, o, &max_model_len); !s.ok()) return s;
  const KvCacheConfig kc =
      LedgerKvConfig(in.config, o.kv_dtype, o.kv_layout, o.block_size, max_model_len);
  absl::StatusOr<KvSequenceCost> kv = KvSequenceCostFor(kc, o.max_num_batched_tokens);
  if (!kv.ok()) return kv.status();
  MemoryLedger l = LedgerLines(in, o, max_model_len, *kv);
  SizePool(kc, in.config.context_length, o, &l);
  return l;
}

}  // namespace pinfer
