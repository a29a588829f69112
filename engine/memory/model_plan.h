// Connects a loaded model to the memory ledger.
#pragma once

#include "absl/status/statusor.h"
#include "engine/memory/memory_ledger.h"
#include "engine/model/model.h"

namespace pinfer {

// The model's widths and its weights' exact bytes per storage type.
absl::StatusOr<PlanInput> PlanInputFromModel(const Model& model);

// The ledger for a KV pool of exactly pool_bytes (--kv-cache-memory): the budget becomes
// weights + workspace + reserve + pool_bytes.
absl::StatusOr<MemoryLedger> ComputeLedgerForPool(const PlanInput& input, LedgerOptions options,
                                                  uint64_t pool_bytes);

}  // namespace pinfer
