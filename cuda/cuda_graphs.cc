// The CUDA backend's graphs (cuda_backend.h): which step sizes get one, what they are
// expected to take, and their capture.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_check.h"
#include "cuda/model_support.h"

namespace pinfer::cuda {

std::vector<int> CudaBackend::GraphSizesFor(int max_num_seqs, int max_tokens) {
  const int top = std::min(max_num_seqs, max_tokens);
  std::vector<int> sizes;
  for (int s : {1, 2, 4, 8}) {
    if (s <= top) sizes.push_back(s);
  }
  for (int s = 16; s <= top; s += 16) sizes.push_back(s);
  if (top >= 1 && sizes.back() != top) sizes.push_back(top);
  return sizes;
}

std::vector<int> CudaBackend::graph_sizes() const {
  std::vector<int> sizes;
  for (const Graph& g : graphs_) sizes.push_back(g.size);
  return sizes;
}

// An estimate, taken before the KV pool is sized: a graph's executable holds its kernel
// nodes' parameters and the driver's bookkeeping, a few KiB per node; 2 MiB per graph (the
// allocation granularity that cudaMemGetInfo sees) plus 16 MiB covers a 32-layer model with
// room to spare. CaptureGraphs measures what they actually took.
uint64_t CudaBackend::GraphReserveBytes(int max_num_seqs) const {
  const size_t graphs = GraphSizesFor(max_num_seqs, max_tokens_).size();
  const uint64_t per_graph = 2ull << 20;
  const uint64_t nodes = static_cast<uint64_t>(model_.config().n_layers) * 20 + 8;
  return (16ull << 20) + graphs * std::max<uint64_t>(per_graph, nodes * 4096);
}

void CudaBackend::DropGraphs() {
  for (Graph& g : graphs_) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

// One graph for steps of `size` tokens, appended to graphs_ (all dropped on failure).
absl::Status CudaBackend::CaptureGraph(int size, const KvLayerView& kv) {
  // Inputs that touch nothing: every row is padding (token 0 at position 0 reading block 0,
  // no KV write). One eager run first loads every kernel and lets cuBLAS choose its own.
  for (int t = 0; t < size; ++t) {
    h_tokens_[t] = 0, h_positions_[t] = 0, h_table_start_[t] = 0, h_slot_offset_[t] = -1;
    h_logit_rows_[t] = t;
  }
  h_tables_[0] = 0;
  PINFER_RETURN_IF_ERROR(UploadMeta(1));
  PINFER_RETURN_IF_ERROR(Enqueue(size, size, kv));
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
  const absl::Status launched = Enqueue(size, size, kv);
  capturing_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
  if (!launched.ok() || ended != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    DropGraphs();
    const absl::Status why =
        launched.ok() ? CudaError(ended, "cudaStreamEndCapture", __FILE__, __LINE__) : launched;
    return absl::Status(why.code(), absl::StrCat("capturing the CUDA graph for steps of ", size,
                                                 " tokens failed: ", why.message()));
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    DropGraphs();
    return CudaError(made, "cudaGraphInstantiate", __FILE__, __LINE__);
  }
  graphs_.push_back({size, exec});
  PINFER_CUDA_RETURN_IF_ERROR(cudaGraphUpload(exec, stream_));
  return absl::OkStatus();
}

absl::Status CudaBackend::CaptureGraphs(KvCache& cache, int max_num_seqs) {
  DropGraphs();
  if (!HoldsPoolOf(cache)) {
    return absl::FailedPreconditionError(
        "CUDA graphs are captured for a KV cache using this backend's MakeKvStorage");
  }
  PINFER_RETURN_IF_ERROR(CheckCudaKvCache(cache));
  // Every decode step fits the tables from now on: max_num_seqs sequences of max_model_len.
  const int bs = cache.block_size();
  const size_t per_seq = static_cast<size_t>((cache.config().max_model_len + bs - 1) / bs);
  PINFER_RETURN_IF_ERROR(ReserveTables(static_cast<size_t>(std::max(max_num_seqs, 1)) * per_seq));
  const size_t rows = static_cast<size_t>(std::min(max_tokens_, std::max(max_num_seqs, 1)));
  if (rows > logit_rows_) PINFER_RETURN_IF_ERROR(ReserveLogits(rows));
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  size_t free0 = 0, free1 = 0, total = 0;
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free0, &total));
  const KvLayerView kv = ViewOf(cache);
  for (int size : GraphSizesFor(max_num_seqs, max_tokens_)) {
    PINFER_RETURN_IF_ERROR(CaptureGraph(size, kv));
  }
  PINFER_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  PINFER_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free1, &total));
  graph_bytes_ = free0 > free1 ? free0 - free1 : 0;
  graph_kv_ = kv;
  return absl::OkStatus();
}

}  // namespace pinfer::cuda
