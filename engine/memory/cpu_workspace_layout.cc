#include "engine/memory/cpu_workspace_layout.h"

#include <algorithm>
#include <thread>

#include "kvcache/attention.h"

namespace pinfer {
namespace {

uint64_t U(int64_t v) { return static_cast<uint64_t>(std::max<int64_t>(v, 0)); }

CpuBufferSize Buffer(CpuBuffer b, std::string_view name, std::string_view line, uint64_t bytes,
                     int copies = 1) {
  const uint64_t rounded = (bytes + kCpuBufferAlign - 1) / kCpuBufferAlign * kCpuBufferAlign;
  return CpuBufferSize{b, name, line, rounded, copies};
}

}  // namespace

std::vector<CpuBufferSize> MatMulWorkspaceLayout(int64_t max_cols, int64_t max_tokens,
                                                 int threads) {
  constexpr std::string_view kLine = "matmul scratch";
  const uint64_t f = sizeof(float);
  return {
      Buffer(CpuBuffer::kMatMulInput, "matmul inputs", kLine, f * U(max_tokens) * U(max_cols)),
      Buffer(CpuBuffer::kMatMulGather, "matmul gather", kLine, f * U(max_cols),
             std::max(threads, 1)),
      Buffer(CpuBuffer::kMatMulTile, "matmul tile", kLine, f * U(kMatMulTileRows) * U(max_cols),
             std::max(threads, 1)),
  };
}

std::vector<CpuBufferSize> CpuWorkspaceLayout(const ModelConfig& c, const CpuWorkspaceLimits& l) {
  constexpr std::string_view kAct = "activations";
  const uint64_t t = sizeof(float) * U(l.max_tokens);
  std::vector<CpuBufferSize> out = {
      Buffer(CpuBuffer::kResidual, "residual", kAct, t * U(c.dim)),
      Buffer(CpuBuffer::kNormed, "normed", kAct, t * U(c.dim)),
      Buffer(CpuBuffer::kQ, "q", kAct, t * U(c.q_dim())),
      Buffer(CpuBuffer::kK, "k", kAct, t * U(c.kv_dim())),
      Buffer(CpuBuffer::kV, "v", kAct, t * U(c.kv_dim())),
      Buffer(CpuBuffer::kAttnOut, "attention output", kAct, t * U(c.q_dim())),
      Buffer(CpuBuffer::kProj, "projection", kAct, t * U(c.dim)),
      Buffer(CpuBuffer::kGate, "gate", kAct, t * U(c.n_ff)),
      Buffer(CpuBuffer::kUp, "up", kAct, t * U(c.n_ff)),
  };
  const int64_t max_cols = std::max({c.dim, c.q_dim(), c.n_ff});
  for (const CpuBufferSize& b : MatMulWorkspaceLayout(max_cols, l.max_tokens, l.threads)) {
    out.push_back(b);
  }
  const AttentionShape shape{c.n_heads, c.n_kv_heads, c.head_dim, 0.0f};
  out.push_back(Buffer(CpuBuffer::kAttentionScores, "attention scores", "attention scratch",
                       sizeof(float) * AttentionScratchFloats(shape), std::max(l.threads, 1)));
  return out;
}

uint64_t LayoutBytes(const std::vector<CpuBufferSize>& layout) {
  uint64_t total = 0;
  for (const CpuBufferSize& b : layout) total += b.bytes();
  return total;
}

int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace pinfer
