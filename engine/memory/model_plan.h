// Connects a loaded model to the memory ledger.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/memory/memory_ledger.h"
#include "engine/model/model.h"

namespace pinfer {

// The model's widths and its weights' exact bytes per storage type.
absl::StatusOr<PlanInput> PlanInputFromModel(const Model& model);
// The same for a model file, which is loaded (mapped, not read) for it.
absl::StatusOr<PlanInput> PlanInputFromModelFile(const std::string& path);

}  // namespace pinfer
