#include "engine/memory/model_plan.h"

#include <algorithm>

#include "loaders/gguf.h"

namespace pinfer {

absl::StatusOr<PlanInput> PlanInputFromModel(const Model& model) {
  PlanInput in;
  in.config = model.config();
  if (!model.stored_tensors().empty()) {
    std::map<GgmlType, WeightLine> lines;
    for (const StoredTensor& t : model.stored_tensors()) {
      WeightLine& l = lines[t.type];
      l.type = std::string(GgmlTypeInfoOf(t.type).name);
      ++l.tensors;
      l.bytes += t.bytes;
    }
    for (auto& [type, line] : lines) in.weights.push_back(line);
  } else {
    for (const auto& [type, bytes] : model.weights().bytes_by_type) {
      in.weights.push_back(WeightLine{std::string(GgmlTypeInfoOf(type).name), 0, bytes});
    }
  }
  std::sort(in.weights.begin(), in.weights.end(),
            [](const WeightLine& a, const WeightLine& b) { return a.bytes > b.bytes; });
  in.weight_format = model.WeightFormat();
  return in;
}

absl::StatusOr<PlanInput> PlanInputFromModelFile(const std::string& path) {
  auto model = Model::Load(path);
  if (!model.ok()) return model.status();
  return PlanInputFromModel(**model);
}

absl::StatusOr<MemoryLedger> ComputeLedgerForPool(const PlanInput& input, LedgerOptions options,
                                                  uint64_t pool_bytes) {
  const int64_t max_len =
      options.max_model_len > 0 ? options.max_model_len : input.config.context_length;
  const WorkspaceBreakdown ws =
      WorkspaceBytes(input.config, options.max_num_batched_tokens, options.max_num_seqs, max_len);
  options.budget_bytes = input.weights_bytes() +
                         std::max(ws.total(), options.workspace_floor_bytes) +
                         options.reserve_bytes + options.graph_bytes + pool_bytes;
  return ComputeLedger(input, options);
}

}  // namespace pinfer
