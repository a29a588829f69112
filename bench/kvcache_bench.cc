// KV cache micro-benchmarks: block-table operations per op, and CPU attention of one query
// token over a 7B-like head layout (32 query heads, 8 kv heads, head_dim 128), paged vs
// contiguous, for every KV format, by the CPU's best kernel set and by the scalar one
// (BM_Attend: one layer, which stays in a large L3), and a whole decode step's attention over
// 32 layers as CpuBackend::Attention runs it (BM_AttendDecodeStep: far more than any L3, so
// its bytes_per_second is the KV read bandwidth from memory).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/cpu/thread_pool.h"
#include "kvcache/attention.h"
#include "kvcache/attention_kernels.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_codec.h"

namespace pinfer {
namespace {

std::unique_ptr<KvCache> AccountingCache(int num_blocks) {
  KvCacheConfig c;
  c.n_layers = 32;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.block_size = 16;
  c.max_model_len = 4096;
  c.max_num_seqs = 1024;
  c.num_blocks = num_blocks;
  return *KvCache::Create(c, KvCache::NoStorage());
}

// One block taken and returned: Append of a block's worth of tokens, then Free.
void BM_AllocateFree(benchmark::State& state) {
  auto cache = AccountingCache(4096);
  SeqId id = 0;
  for (auto _ : state) {
    (void)cache->AddSequence(id);
    (void)cache->Append(id, 16);
    cache->Free(id);
    ++id;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocateFree);

// Decode-style growth: one token per Append (a new block every 16 tokens).
void BM_AppendOneToken(benchmark::State& state) {
  auto cache = AccountingCache(4096);
  SeqId id = 0;
  (void)cache->AddSequence(id);
  for (auto _ : state) {
    if (cache->num_tokens(id) == 4096) {
      state.PauseTiming();
      cache->Free(id);
      (void)cache->AddSequence(++id);
      state.ResumeTiming();
    }
    (void)cache->Append(id, 1);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AppendOneToken);

// Fork a 1000-token sequence (63 blocks shared), copy-on-write its last block, free it.
void BM_ForkAppendFree(benchmark::State& state) {
  auto cache = AccountingCache(4096);
  (void)cache->AddSequence(0);
  (void)cache->Append(0, 1000);
  SeqId id = 1;
  for (auto _ : state) {
    (void)cache->Fork(0, id);
    (void)cache->Append(id, 1);
    cache->Free(id);
    ++id;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ForkAppendFree);

// A new sequence whose 512-token prompt is cached: MatchPrefix takes 31 blocks, then Free.
void BM_PrefixHit(benchmark::State& state) {
  auto cache = AccountingCache(4096);
  std::vector<int32_t> prompt(512);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i * 7 % 32000);
  (void)cache->AddSequence(0);
  (void)cache->Append(0, 512);
  cache->MarkComputed(0, prompt);
  cache->Free(0);
  SeqId id = 1;
  int matched = 0;
  for (auto _ : state) {
    (void)cache->AddSequence(id);
    matched = cache->MatchPrefix(id, prompt);
    cache->Free(id);
    ++id;
  }
  state.counters["blocks"] = matched / 16;
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PrefixHit);

// AttendOne over n_ctx tokens of one layer: args {dtype index, layout, n_ctx, kernel set
// (0: the best this CPU runs, 1: scalar)}.
void BM_Attend(benchmark::State& state) {
  const KvDtype d = kAllKvDtypes[state.range(0)];
  const KvLayout layout = state.range(1) ? KvLayout::kContiguous : KvLayout::kPaged;
  const int n_ctx = static_cast<int>(state.range(2));
  KvCacheConfig c;
  c.n_layers = 1;
  c.n_kv_heads = 8;
  c.head_dim = 128;
  c.dtype = d;
  c.layout = layout;
  c.block_size = 16;
  c.max_model_len = 4096;
  c.num_blocks = layout == KvLayout::kPaged ? 4096 / 16 : 1;
  auto cache = *KvCache::Create(c);
  (void)cache->AddSequence(1);
  (void)cache->Append(1, n_ctx);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> row(8 * 128);
  for (int t = 0; t < n_ctx; ++t) {
    for (int kv = 0; kv < 2; ++kv) {
      for (float& v : row) v = dist(rng);
      KvEncodeRow(d, row.data(), cache->TokenRow(1, t, 0, kv), 8 * 128);
    }
  }
  const AttentionShape s{32, 8, 128, 1.0f / std::sqrt(128.0f)};
  std::vector<float> q(32 * 128), out(32 * 128), scratch(AttentionScratchFloats(s));
  for (float& v : q) v = dist(rng);
  const attention::AttentionKernels& k =
      state.range(3) ? attention::ScalarAttentionKernels() : attention::ActiveAttentionKernels();
  for (auto _ : state) {
    attention::AttendOneWith(k, *cache, 1, 0, s, q.data(), n_ctx, 0, 8, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(KvDtypeName(d)) + (state.range(1) ? " contiguous " : " paged ") +
                 k.name);
  state.SetBytesProcessed(state.iterations() * 2 * n_ctx *
                          static_cast<int64_t>(cache->row_bytes()));
}
BENCHMARK(BM_Attend)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}, {1024, 4096}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// One decode token's attention in every layer of a 32-layer paged f16 cache (block size 16,
// huge pages as the CPU backend asks), the kv heads shared out to the threads as
// CpuBackend::Attention does: args {n_kv_heads (32: llama2-7b, 8: llama3-8b; 32 query heads of
// 128), n_ctx, threads, kv heads per work item (0: KvHeadsPerItem's choice, as the backend)}.
// bytes_per_second: K and V bytes read (every layer's rows, all heads); with 1 thread on a
// loaded machine the CPU time column is the steadier figure.
void BM_AttendDecodeStep(benchmark::State& state) {
  const int n_kv = static_cast<int>(state.range(0));
  const int n_ctx = static_cast<int>(state.range(1));
  const int n_layers = 32;
  KvCacheConfig c;
  c.n_layers = n_layers;
  c.n_kv_heads = n_kv;
  c.head_dim = 128;
  c.dtype = KvDtype::kF16;
  c.block_size = 16;
  c.max_model_len = n_ctx;
  c.num_blocks = n_ctx / 16;
  const size_t block_bytes =
      static_cast<size_t>(2) * n_layers * 16 * *KvRowBytes(c.dtype, int64_t{n_kv} * 128);
  auto storage = *KvCache::CommittedHostStorage(block_bytes, c.num_blocks, {.huge_pages = true});
  auto cache = *KvCache::Create(c, std::move(storage));
  (void)cache->AddSequence(1);
  (void)cache->Append(1, n_ctx);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> row(static_cast<size_t>(n_kv) * 128);
  uint32_t x = 1;  // a cheap generator: 512 MiB of rows
  for (int l = 0; l < n_layers; ++l) {
    for (int t = 0; t < n_ctx; ++t) {
      for (int kv = 0; kv < 2; ++kv) {
        for (float& v : row)
          v = static_cast<float>((x = x * 1664525u + 1013904223u) >> 8) * 0x1p-23f - 1.0f;
        KvEncodeRow(c.dtype, row.data(), cache->TokenRow(1, t, l, kv), n_kv * 128);
      }
    }
  }
  const AttentionShape s{32, n_kv, 128, 1.0f / std::sqrt(128.0f)};
  ThreadPool pool(static_cast<int>(state.range(2)));
  std::vector<float> q(32 * 128), out(32 * 128);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()),
                                          std::vector<float>(AttentionScratchFloats(s)));
  for (float& v : q) v = dist(rng);
  for (auto _ : state) {
    for (int l = 0; l < n_layers; ++l) {
      const int hpi =
          state.range(3) ? static_cast<int>(state.range(3)) : KvHeadsPerItem(n_kv, 1, pool.size());
      pool.ParallelForDynamic(
          n_kv / hpi,
          [&](int64_t begin, int64_t end, int thread) {
            for (int64_t it = begin; it < end; ++it) {
              AttendOne(*cache, 1, l, s, q.data(), n_ctx, static_cast<int>(it) * hpi,
                        static_cast<int>(it + 1) * hpi, out.data(), scratch[thread].data());
            }
          },
          1);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(
      "f16 paged, " + std::to_string(n_kv) + " kv heads, " + std::to_string(pool.size()) +
      " threads, " +
      std::to_string(state.range(3) ? state.range(3) : KvHeadsPerItem(n_kv, 1, pool.size())) +
      " kv heads per item");
  state.SetBytesProcessed(state.iterations() * int64_t{n_layers} * 2 * n_ctx *
                          static_cast<int64_t>(cache->row_bytes()));
}
BENCHMARK(BM_AttendDecodeStep)
    ->ArgsProduct({{32, 8}, {1024, 4096}, {1, 2}, {0, 1, 8, 32}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace pinfer
