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

}  // namespace pinfer
