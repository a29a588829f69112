#include "engine/cpu/repack.h"

#include <map>

#include "loaders/quants_q8a.h"
#include "loaders/quants_q8k.h"

namespace pinfer {

PackedKernel PackedKernelFor(KernelSet s, GgmlType t) {
  if (const quants::PackedQ8AKernels* k = quants::PackedQ8AKernelsFor(s); k != nullptr) {
    if (quants::PackedDotFn dot = quants::PackedDot(*k, t); dot != nullptr) {
      return {quants::PackedBytes, quants::PackedGroupBytes,
              quants::PackRows,    quants::Q8AKernelsFor(s).quantize,
              quants::Q8ARowBytes, dot};
    }
  }
  if (const quants::PackedKQuantKernels* k = quants::PackedKQuantKernelsFor(s); k != nullptr) {
    if (quants::PackedDotFn dot = quants::PackedKDot(*k, t); dot != nullptr) {
      return {quants::PackedKBytes, quants::PackedKGroupBytes,
              quants::PackKRows,    quants::KQuantKernelsFor(s).quantize_q8k,
              quants::Q8KRowBytes,  dot};
    }
  }
  return {};
}

bool RepackableMatrix(const WeightMatrix& m, KernelSet s) {
  if (m.data == nullptr || m.rows <= 0) return false;
  if (m.cols % GgmlTypeInfoOf(m.type).block_size != 0) return false;
  return PackedKernelFor(s, m.type).dot != nullptr;
}

RepackPlan PlanRepack(const Model& model, KernelSet s) {
  const ModelWeights& w = model.weights();
  RepackPlan plan;
  auto add = [&](const WeightMatrix& m) {
    if (!RepackableMatrix(m, s) || model.OwnsMatrix(m)) return;
    const PackedKernel k = PackedKernelFor(s, m.type);
    plan.matrices.push_back(&m);
    plan.matrix_bytes.push_back(static_cast<uint64_t>(k.bytes(m.type, m.rows, m.cols)));
    plan.packed_bytes += plan.matrix_bytes.back();
    plan.file_bytes += m.bytes();
  };
  // tok_embd never (its rows are looked up one by one), nor an output tied to it.
  if (w.output.data != w.tok_embd.data) add(w.output);
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      add(*m);
    }
  }
  return plan;
}

void AccountRepack(const RepackPlan& plan, PlanInput* in) {
  std::map<std::string, int64_t> delta;  // by type name, as the lines are
  for (size_t i = 0; i < plan.matrices.size(); ++i) {
    const WeightMatrix* m = plan.matrices[i];
    delta[std::string(GgmlTypeInfoOf(m->type).name)] +=
        static_cast<int64_t>(plan.matrix_bytes[i]) - static_cast<int64_t>(m->bytes());
  }
  for (WeightLine& line : in->weights) {
    if (auto it = delta.find(line.type); it != delta.end()) {
      line.bytes = static_cast<uint64_t>(static_cast<int64_t>(line.bytes) + it->second);
    }
  }
}

}  // namespace pinfer
