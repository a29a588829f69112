#include "engine/cpu/cpu_workspace.h"

namespace pinfer {

absl::StatusOr<std::unique_ptr<CpuWorkspace>> CpuWorkspace::Create(
    std::vector<CpuBufferSize> layout, CommittedMemory::Options options) {
  std::unique_ptr<CpuWorkspace> ws(new CpuWorkspace());
  ws->index_.fill(-1);
  uint64_t offset = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    const size_t b = static_cast<size_t>(layout[i].buffer);
    if (b >= kBuffers || ws->index_[b] >= 0) {
      return absl::InternalError("a CPU workspace layout names a buffer twice or an unknown one");
    }
    ws->index_[b] = static_cast<int>(i);
    ws->offset_[b] = offset;
    offset += layout[i].bytes();
  }
  ws->layout_ = std::move(layout);
  auto memory = CommittedMemory::Allocate(offset, options, "the CPU workspace");
  if (!memory.ok()) return memory.status();
  ws->memory_ = *std::move(memory);
  return ws;
}

absl::StatusOr<std::unique_ptr<CpuWorkspace>> CpuWorkspace::ForMatMul(int64_t max_cols,
                                                                      int64_t max_tokens,
                                                                      int threads) {
  return Create(MatMulWorkspaceLayout(max_cols, max_tokens, threads), {});
}

uint64_t CpuWorkspace::bytes_per_copy(CpuBuffer buffer) const {
  const size_t b = static_cast<size_t>(buffer);
  if (b >= kBuffers || index_[b] < 0) return 0;
  return layout_[static_cast<size_t>(index_[b])].bytes_per_copy;
}

uint8_t* CpuWorkspace::Address(CpuBuffer buffer, int thread) const {
  const size_t b = static_cast<size_t>(buffer);
  if (b >= kBuffers || index_[b] < 0 || memory_->data() == nullptr) return nullptr;
  const CpuBufferSize& size = layout_[static_cast<size_t>(index_[b])];
  if (thread < 0 || thread >= size.copies) return nullptr;
  return memory_->data() + offset_[b] + static_cast<uint64_t>(thread) * size.bytes_per_copy;
}

}  // namespace pinfer
