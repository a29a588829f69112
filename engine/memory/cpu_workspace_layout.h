// The CPU backend's workspace, buffer by buffer: the one formula behind the memory ledger's
// workspace line (memory_ledger.h) and behind what the CPU backend allocates
// (engine/cpu/cpu_workspace.h), so that the two cannot drift apart.
//
// Every scratch buffer the CPU forward pass uses is listed here, sized once from the engine's
// limits (tokens per step, threads), and carved out of one allocation that
// the backend commits (every page written) before warm-up. No kernel allocates during a step:
// a kernel takes its buffers from the CpuWorkspace it is handed (thread_local or growing
// vectors are not allowed), so no line of the ledger grows after start.
//
// Adding a buffer (a kernel's scratch, e.g. 8-bit quantized activations):
//   1. add an enumerator to CpuBuffer (before kCount);
//   2. give its size in CpuWorkspaceLayout (cpu_workspace_layout.cc): bytes per copy, one copy
//      or one per thread (ThreadPool index), and the ledger sub-line it belongs to;
//   3. in the kernel, take it with CpuWorkspace::Get(buffer) (one copy) or
//      CpuWorkspace::Get(buffer, thread) (per thread); both return 64-byte aligned memory
//      of exactly the bytes given here.
// The ledger, `plan` and the memory report then count it; cpu_workspace_test checks that
// what the backend allocates equals the ledger's line.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/model/model_config.h"

namespace pinfer {

enum class CpuBuffer : int {
  // Activations, [max_tokens x width] float32, row-major per token.
  kResidual,  // x: [T x dim] the residual stream
  kNormed,    // [T x dim] RMSNorm output (also the final norm's rows)
  kQ,         // [T x q_dim]
  kK,         // [T x kv_dim]
  kV,         // [T x kv_dim]
  kAttnOut,   // [T x q_dim] attention output
  kProj,      // [T x dim] attention / FFN output projection
  kGate,      // [T x n_ff]
  kUp,        // [T x n_ff]
  // MatMul (engine/cpu/matmul.h).
  kMatMulInput,   // [T x max_cols] float32: the batch's inputs in the dot layout, or gathered
  kMatMulGather,  // per thread: [max_cols] float32, one token's inputs in a permuted order
  kMatMulTile,    // per thread: [kMatMulTileRows x max_cols] float32, decoded weight rows
  // Attention (kvcache/attention.h): per thread, AttentionScratchFloats (a tile of scores per
  // query head and a tile of decoded rows, whatever the context's length).
  kAttentionScores,
  kCount
};

// Weight rows a MatMul worker decodes together while the batch passes over them.
inline constexpr int64_t kMatMulTileRows = 16;

// Every buffer starts on a 64-byte boundary and takes a multiple of 64 bytes.
inline constexpr uint64_t kCpuBufferAlign = 64;

// What sizes the workspace. max_cols is the widest matrix input (max of dim, q_dim, n_ff).
struct CpuWorkspaceLimits {
  int64_t max_tokens = 0;  // tokens in one forward step (max_num_batched_tokens)
  int threads = 1;         // worker threads including the caller (ThreadPool::size())
};

struct CpuBufferSize {
  CpuBuffer buffer = CpuBuffer::kCount;
  std::string_view name;        // "residual", "matmul tile", ...
  std::string_view line;        // the ledger's workspace sub-line: "activations", "matmul scratch",
                                // "attention scratch"
  uint64_t bytes_per_copy = 0;  // rounded up to kCpuBufferAlign
  int copies = 1;               // 1, or one per thread
  uint64_t bytes() const { return bytes_per_copy * static_cast<uint64_t>(copies); }
};

// One entry per CpuBuffer, in enumerator order.
std::vector<CpuBufferSize> CpuWorkspaceLayout(const ModelConfig& c, const CpuWorkspaceLimits& l);

// The MatMul buffers alone, for matrices of up to max_cols inputs (tests and benchmarks that
// call MatMul without a backend); the same sizes CpuWorkspaceLayout gives them.
std::vector<CpuBufferSize> MatMulWorkspaceLayout(int64_t max_cols, int64_t max_tokens, int threads);

// Sum of a layout's bytes.
uint64_t LayoutBytes(const std::vector<CpuBufferSize>& layout);

// The thread count a request means: n > 0 as given, 0 (or less) the machine's hardware
// threads (at least 1). ThreadPool and the ledger both resolve through this.
int ResolveThreads(int requested);

}  // namespace pinfer
