// The rates the kernel micro-benchmarks report, so that their tables read alike: bytes/s of
// weights streamed per pass (GB/s of weights: the decode figure) and op/s, a multiply and an add
// per weight and token (2 * rows * cols * tokens per pass: the prefill figure, GOP/s).
#pragma once

#include <cstdint>

#include "benchmark/benchmark.h"

namespace pinfer::bench {

// op/s of a pass of macs_per_pass multiply-adds, over the iterations `state` ran.
inline void SetOpRate(benchmark::State& state, int64_t macs_per_pass) {
  state.counters["op/s"] = benchmark::Counter(
      2.0 * static_cast<double>(macs_per_pass) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Both rates of a pass over weight_bytes of weights making macs_per_pass multiply-adds.
inline void SetWeightRates(benchmark::State& state, int64_t weight_bytes, int64_t macs_per_pass) {
  state.SetBytesProcessed(state.iterations() * weight_bytes);
  SetOpRate(state, macs_per_pass);
}

}  // namespace pinfer::bench
