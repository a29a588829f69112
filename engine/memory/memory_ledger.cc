// The ledger's arithmetic: plan inputs from a named shape, the workspace bound, the KV pool.
#include "engine/memory/memory_ledger.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/model/model_shapes.h"
#include "loaders/absl_compat.h"

namespace pinfer {
namespace {

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

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

std::string NoFitMessage(const MemoryLedger& l) {
  const uint64_t fixed = l.weights_bytes + l.workspace_bytes + l.reserve_bytes + l.graph_bytes;
  const uint64_t seq_kv = U(l.blocks_per_sequence) * l.kv_bytes_per_block;
  const std::string needed = FormatBytes(fixed + seq_kv);
  std::string msg = absl::StrCat(
      "one sequence of max_model_len ", l.max_model_len, " needs ", FormatBytes(seq_kv),
      " of KV cache (", l.blocks_per_sequence, " blocks of ", l.block_size, " tokens at ",
      FormatBytes(l.kv_bytes_per_token), " per token, ", Sv(KvDtypeName(l.kv_dtype)), "), so ",
      needed, " in all with weights ", FormatBytes(l.weights_bytes), ", workspace ",
      FormatBytes(l.workspace_bytes), " and reserve ", FormatBytes(l.reserve_bytes),
      l.graph_bytes > 0 ? absl::StrCat(" and CUDA graphs ", FormatBytes(l.graph_bytes)) : "", "; ");
  if (fixed >= l.budget_bytes) {
    absl::StrAppend(&msg, "the budget of ", FormatBytes(l.budget_bytes),
                    " does not even cover weights, workspace and reserve, so no KV cache fits. ",
                    "Raise ", l.budget_option, " to at least ", needed,
                    ", or lower --reserve / --max-num-batched-tokens, or use a smaller weight "
                    "format.");
    return msg;
  }
  absl::StrAppend(&msg, "the budget of ", FormatBytes(l.budget_bytes), " leaves ",
                  FormatBytes(l.budget_bytes - fixed), " for the KV pool (", l.kv_pool_tokens,
                  " tokens). ");
  if (l.max_model_len_fit > 0) {
    absl::StrAppend(&msg, "The longest max_model_len that fits is ", l.max_model_len_fit,
                    " (--max-model-len ", l.max_model_len_fit, "); or raise ", l.budget_option,
                    " to at least ", needed, ", or choose a smaller --kv-dtype (q8_0, q4_0).");
  } else {
    absl::StrAppend(&msg, "Not even one block of ", l.block_size, " tokens fits; raise ",
                    l.budget_option, " to at least ", needed,
                    " or lower --reserve / --max-num-batched-tokens.");
  }
  return msg;
}

}  // namespace

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

WorkspaceBreakdown WorkspaceBytes(const ModelConfig& c, int64_t max_num_batched_tokens,
                                  int max_num_seqs, int64_t max_model_len) {
  const uint64_t t = U(max_num_batched_tokens);
  const uint64_t s = U(std::min<int64_t>(max_num_seqs, max_num_batched_tokens));
  const uint64_t per_token = 4 * U(c.dim) + 2 * U(c.q_dim()) + 2 * U(c.kv_dim()) + 2 * U(c.n_ff) +
                             U(std::max(c.dim, c.n_ff));
  WorkspaceBreakdown w;
  w.activations = 4 * t * per_token;
  w.logits = 4 * 2 * s * U(c.n_vocab);
  w.scores = 4 * U(kLedgerScoreRows) * U(max_model_len);
  w.rope = 4 * U(max_model_len) * U(c.head_dim);
  return w;
}

absl::StatusOr<MemoryLedger> ComputeLedger(const PlanInput& in, const LedgerOptions& o) {
  const ModelConfig& c = in.config;
  if (absl::Status s = CheckWidths(c); !s.ok()) return s;
  if (o.budget_bytes == 0) {
    return absl::InvalidArgumentError(
        "no memory budget given; say how much memory the engine may use (e.g. --memory 16GiB)");
  }
  if (o.block_size < 1 || o.block_size > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block size ", o.block_size, " is out of range; use 1 to 65536 tokens (16 is usual)"));
  }
  const int64_t max_model_len = o.max_model_len > 0 ? o.max_model_len : c.context_length;
  if (max_model_len <= 0) {
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
  absl::StatusOr<size_t> row = KvRowBytes(o.kv_dtype, c.kv_dim());
  if (!row.ok()) return row.status();

  MemoryLedger l;
  l.model_name = c.name;
  l.weight_format = in.weight_format;
  l.kv_dtype = o.kv_dtype;
  l.block_size = o.block_size;
  l.max_model_len = max_model_len;
  l.max_num_seqs = o.max_num_seqs;
  l.max_num_batched_tokens = o.max_num_batched_tokens;
  l.budget_bytes = o.budget_bytes;
  l.budget_option = o.budget_option;
  l.weights = in.weights;
  l.weights_bytes = in.weights_bytes();
  l.workspace = WorkspaceBytes(c, o.max_num_batched_tokens, o.max_num_seqs, max_model_len);
  l.workspace_bytes = std::max(l.workspace.total(), o.workspace_floor_bytes);
  l.reserve_bytes = o.reserve_bytes;
  l.graph_bytes = o.graph_bytes;
  l.kv_bytes_per_token = 2 * U(c.n_layers) * *row;
  l.kv_bytes_per_block = l.kv_bytes_per_token * U(o.block_size);

  const uint64_t fixed = l.weights_bytes + l.workspace_bytes + l.reserve_bytes + l.graph_bytes;
  const uint64_t left = o.budget_bytes > fixed ? o.budget_bytes - fixed : 0;
  l.kv_pool_blocks = static_cast<int64_t>(left / l.kv_bytes_per_block);
  l.kv_pool_bytes = U(l.kv_pool_blocks) * l.kv_bytes_per_block;
  l.kv_pool_tokens = l.kv_pool_blocks * o.block_size;
  l.blocks_per_sequence = (max_model_len + o.block_size - 1) / o.block_size;
  l.max_concurrency = l.kv_pool_blocks / l.blocks_per_sequence;
  l.max_model_len_fit = l.kv_pool_tokens;
  l.fits = l.max_concurrency >= 1;
  if (!l.fits) l.message = NoFitMessage(l);
  return l;
}

}  // namespace pinfer
