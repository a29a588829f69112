// Weights repacked once at load into the row-interleaved layout of loaders/quants_packed.h
// (groups of 8 rows), for the formats whose packed kernels the process's kernel set has
// (issue 17, CPU speed). The CPU backend does it (CpuBackend::Commit); `plan` and the engine's
// ledger ask the same rule (PlanRepack) so the weights line counts what the backend will hold.
//
// The rule: a matrix is repacked when its type has a packed layout and the kernel set
// (loaders/kernel_set.h) a packed kernel for it (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K in every
// set: scalar, the x86 sets and NEON), its rows are whole blocks, and it is not
// tok_embd (looked up row by row) nor an output matrix tied to tok_embd (its packed copy would
// sit beside the embedding rows, which stay), nor a matrix the Model owns (GPTQ/AWQ layers
// repacked to Q4_1 at load: their buffer could not be released, so a packed copy would double
// them). A fused tensor's row views (RowView: phi3's
// attn_qkv, ...) are repacked as matrices of their own. Only the CPU backend repacks: a device
// backend uploads the file's layout.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/memory/memory_ledger.h"
#include "engine/model/model.h"
#include "engine/model/weights.h"
#include "loaders/kernel_set.h"
#include "loaders/quants_int8.h"
#include "loaders/quants_packed.h"
#include "loaders/quants_packed_k.h"

namespace pinfer {

// A format's packed layout (8-row groups) and its packed kernel in one kernel set: how to pack
// (loaders/quants_packed.h's PackRows for Q4_0, Q4_1, Q8_0; quants_packed_k.h's PackKRows for
// Q4_K, Q5_K, Q6_K), the bytes, and the activation rows the kernel takes (Q8A or Q8_K: the
// quantizer and the bytes of one token's row). dot == nullptr: none.
struct PackedKernel {
  int64_t (*bytes)(GgmlType t, int64_t rows, int64_t n) = nullptr;  // ceil(rows / 8) groups
  int64_t (*group_bytes)(GgmlType t, int64_t n) = nullptr;
  void (*pack)(GgmlType t, const void* src, int64_t src_row_bytes, int64_t n_rows, int64_t n,
               void* dst) = nullptr;  // may be split by whole groups
  quants::ActQuantFn quantize = nullptr;
  int64_t (*act_row_bytes)(int64_t n) = nullptr;
  quants::PackedDotFn dot = nullptr;
};
inline constexpr int64_t kPackedGroupRows = 8;  // both layouts' rows per group

// The packed kernel of kernel set s for weights of type t, or an empty one (the one table
// MatMul, the backend and the rule ask).
PackedKernel PackedKernelFor(KernelSet s, GgmlType t);

// Whether the rule repacks m (besides the tok_embd / tied-output exclusion, PlanRepack's).
bool RepackableMatrix(const WeightMatrix& m, KernelSet s);

// The matrices of w the CPU backend repacks for kernel set s, in the model's order (output,
// then layer by layer), and what they take.
struct RepackPlan {
  std::vector<const WeightMatrix*> matrices;
  std::vector<uint64_t> matrix_bytes;  // each one's packed bytes
  uint64_t packed_bytes = 0;           // sum of PackedKernel::bytes (a last partial group padded)
  uint64_t file_bytes = 0;             // the same matrices' bytes in the file's layout
};
RepackPlan PlanRepack(const Model& model, KernelSet s);

// The weight lines of `in` as the backend holds the weights after `plan`: each repacked
// matrix's type line counts its packed bytes instead of its file bytes (they differ by the
// padding of a last partial group of 8 rows).
void AccountRepack(const RepackPlan& plan, PlanInput* in);

}  // namespace pinfer
