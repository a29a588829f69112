// The CPU backend's scratch memory: every buffer of a CpuWorkspaceLayout
// (engine/memory/cpu_workspace_layout.h, which says how to add one) carved from one
// allocation that is committed (every page written) when the workspace is created. Kernels
// draw their buffers from here and allocate nothing while a step runs; bytes() is what the
// memory ledger's workspace line predicts for the same layout.
//
// Not thread-safe to create; Get() is const and may be called from any thread. A per-thread
// buffer's copy `thread` belongs to ThreadPool worker `thread` for the length of a
// ParallelFor (the index the pool passes to the loop body).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/memory/cpu_workspace_layout.h"
#include "loaders/host_memory.h"

namespace pinfer {

class CpuWorkspace {
 public:
  // One committed allocation holding every buffer of `layout`.
  static absl::StatusOr<std::unique_ptr<CpuWorkspace>> Create(std::vector<CpuBufferSize> layout,
                                                              CommittedMemory::Options options);
  // The MatMul buffers alone (MatMulWorkspaceLayout): for tests and benchmarks that call
  // MatMul without a backend.
  static absl::StatusOr<std::unique_ptr<CpuWorkspace>> ForMatMul(int64_t max_cols,
                                                                 int64_t max_tokens, int threads);

  // Copy `thread` of `buffer` (0 for single-copy buffers), 64-byte aligned, of
  // bytes_per_copy(buffer) bytes; nullptr when the layout has no such buffer or copy.
  template <typename T = float>
  T* Get(CpuBuffer buffer, int thread = 0) const {
    return reinterpret_cast<T*>(Address(buffer, thread));
  }
  // Bytes of one copy of `buffer` (0 when the layout has none).
  uint64_t bytes_per_copy(CpuBuffer buffer) const;
  // Elements of T that fit in one copy of `buffer`.
  template <typename T = float>
  uint64_t capacity(CpuBuffer buffer) const {
    return bytes_per_copy(buffer) / sizeof(T);
  }

  uint64_t bytes() const { return LayoutBytes(layout_); }  // all buffers, all copies
  const std::vector<CpuBufferSize>& layout() const { return layout_; }
  const CommittedMemory& memory() const { return *memory_; }

 private:
  CpuWorkspace() = default;
  uint8_t* Address(CpuBuffer buffer, int thread) const;

  std::vector<CpuBufferSize> layout_;
  std::unique_ptr<CommittedMemory> memory_;
  static constexpr size_t kBuffers = static_cast<size_t>(CpuBuffer::kCount);
  std::array<int, kBuffers> index_{};        // position in layout_, or -1
  std::array<uint64_t, kBuffers> offset_{};  // of copy 0 in memory_
};

}  // namespace pinfer
