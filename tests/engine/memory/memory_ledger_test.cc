#include "engine/memory/memory_ledger.h"

#include "engine/memory/cpu_workspace_layout.h"
#include "engine/memory/model_plan.h"
#include "engine/model/model_shapes.h"
#include "gtest/gtest.h"
#include "kvcache/attention.h"
#include "kvcache/kv_cache.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

MemoryLedger Plan(std::string_view shape, std::string_view type, KvDtype kv,
                  uint64_t budget = 16 * kGiB, int64_t max_model_len = 0) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape(shape, type);
  EXPECT_TRUE(in.ok()) << in.status();
  LedgerOptions o;
  o.kv_dtype = kv;
  o.reserve_bytes = kDefaultDeviceReserveBytes;  // DESIGN.md's 16 GiB card
  o.budget_bytes = budget;
  o.max_model_len = max_model_len;
  absl::StatusOr<MemoryLedger> l = ComputeLedger(*in, o);
  EXPECT_TRUE(l.ok()) << l.status();
  return *l;
}

TEST(MemoryLedger, KvBytesPerTokenUsesKvHeadsAndBlockBytes) {
  EXPECT_EQ(Plan("llama2-7b", "Q4_0", KvDtype::kF16).kv_bytes_per_token, 524288u);
  EXPECT_EQ(Plan("llama2-7b", "Q4_0", KvDtype::kQ8_0).kv_bytes_per_token, 278528u);
  EXPECT_EQ(Plan("mistral-7b", "Q4_0", KvDtype::kF16).kv_bytes_per_token, 131072u);
  EXPECT_EQ(Plan("llama2-7b", "Q4_0", KvDtype::kQ4_0).kv_bytes_per_token, 2u * 32 * 4096 / 32 * 18);
}

TEST(MemoryLedger, WeightsAreTheSumOfTheTensors) {
  MemoryLedger l = Plan("llama2-7b", "Q4_0", KvDtype::kF16);
  absl::StatusOr<ModelConfig> c = NamedShape("llama2-7b");
  absl::StatusOr<FileType> ft = ParseFileType("Q4_0");
  EXPECT_EQ(l.weights_bytes, TensorBytes(PlanTensors(*c, *ft)));
  EXPECT_GT(l.weights_bytes, 3'500'000'000u);
  EXPECT_LT(l.weights_bytes, 3'900'000'000u);
  ASSERT_EQ(l.weights.size(), 3u);  // Q4_0, Q6_K (output), F32 (norms)
  EXPECT_EQ(l.weights[0].type, "Q4_0");
  EXPECT_EQ(l.weights[0].tensors, 1 + 32 * 7);
}

TEST(MemoryLedger, PoolIsWhatIsLeftInWholeBlocks) {
  MemoryLedger l = Plan("llama2-7b", "Q4_0", KvDtype::kF16);
  const uint64_t left = 16 * kGiB - l.weights_bytes - l.workspace_bytes - l.reserve_bytes;
  const uint64_t block = 524288u * 16;
  EXPECT_EQ(l.kv_bytes_per_block, block);
  EXPECT_EQ(l.kv_pool_blocks, static_cast<int64_t>(left / block));
  EXPECT_EQ(l.kv_pool_bytes, static_cast<uint64_t>(l.kv_pool_blocks) * block);
  EXPECT_EQ(l.kv_pool_tokens, l.kv_pool_blocks * 16);
  EXPECT_EQ(l.max_model_len, 4096);
  EXPECT_EQ(l.max_concurrency, l.kv_pool_tokens / 4096);
  EXPECT_EQ(l.max_model_len_fit, l.kv_pool_tokens);
  EXPECT_TRUE(l.fits);
  EXPECT_TRUE(l.message.empty());
  // DESIGN.md: "about 20,000 tokens of KV" for this case.
  EXPECT_GT(l.kv_pool_tokens, 19000);
  EXPECT_LT(l.kv_pool_tokens, 24000);
}

TEST(MemoryLedger, ConcurrencyRoundsSequencesUpToBlocks) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape("tiny", "Q8_0");
  ASSERT_TRUE(in.ok());
  LedgerOptions o;
  o.reserve_bytes = 0;
  o.max_model_len = 17;  // two blocks of 16
  o.max_num_seqs = 8;    // work for 16 blocks: the budget is the bound
  o.max_num_batched_tokens = 64;
  o.budget_bytes = kGiB;
  absl::StatusOr<MemoryLedger> probe_or = ComputeLedger(*in, o);
  ASSERT_TRUE(probe_or.ok()) << probe_or.status();
  const MemoryLedger& probe = *probe_or;
  // Exactly five blocks of room: 5 / 2 = 2 sequences, 80 tokens for one.
  o.budget_bytes = probe.weights_bytes + probe.workspace_bytes + 5 * probe.kv_bytes_per_block +
                   probe.kv_bytes_per_block / 2;
  absl::StatusOr<MemoryLedger> l_or = ComputeLedger(*in, o);
  ASSERT_TRUE(l_or.ok()) << l_or.status();
  const MemoryLedger& l = *l_or;
  EXPECT_EQ(l.kv_pool_blocks, 5);
  EXPECT_EQ(l.pool_bound, PoolBound::kBudget);
  EXPECT_EQ(l.blocks_per_sequence, 2);
  EXPECT_EQ(l.max_concurrency, 2);
  EXPECT_EQ(l.max_model_len_fit, 80);
}

TEST(MemoryLedger, TooSmallSaysWhatIsNeededAndTheLongestThatFits) {
  // mistral-7b at its full 32k context in 6 GiB with 1 GiB reserve.
  MemoryLedger l = Plan("mistral-7b", "Q4_K_M", KvDtype::kF16, 6 * kGiB, 32768);
  EXPECT_EQ(l.max_model_len, 32768);
  EXPECT_FALSE(l.fits);
  EXPECT_EQ(l.max_concurrency, 0);
  EXPECT_GT(l.max_model_len_fit, 0);
  EXPECT_LT(l.max_model_len_fit, 32768);
  EXPECT_NE(
      l.message.find("longest max_model_len that fits is " + std::to_string(l.max_model_len_fit)),
      std::string::npos)
      << l.message;
  EXPECT_NE(l.message.find("4.00 GiB"), std::string::npos) << l.message;  // 32768 x 128 KiB
  // The suggested length does fit.
  MemoryLedger shorter = Plan("mistral-7b", "Q4_K_M", KvDtype::kF16, 6 * kGiB, l.max_model_len_fit);
  EXPECT_TRUE(shorter.fits);
  EXPECT_GE(shorter.max_concurrency, 1);
}

TEST(MemoryLedger, MaxModelLenDefaultsAsTheEngines) {
  // The model's context length, at most 4096 (mistral-7b states 32768).
  EXPECT_EQ(Plan("mistral-7b", "Q4_K_M", KvDtype::kF16).max_model_len, 4096);
  EXPECT_EQ(DefaultMaxModelLen(2048), 2048);
}

TEST(MemoryLedger, BudgetBelowWeightsLeavesNoPool) {
  MemoryLedger l = Plan("llama2-7b", "F16", KvDtype::kF16, 8 * kGiB);
  EXPECT_FALSE(l.fits);
  EXPECT_EQ(l.kv_pool_bytes, 0u);
  EXPECT_EQ(l.max_model_len_fit, 0);
  EXPECT_NE(l.message.find("does not even cover"), std::string::npos) << l.message;
}

TEST(MemoryLedger, WorkspaceIsTheCpuBackendsLayout) {
  ModelConfig c = *NamedShape("llama2-7b");
  LedgerOptions o;
  o.max_num_batched_tokens = 512;
  o.max_num_seqs = 16;
  o.threads = 2;
  const std::vector<WorkspacePart> parts = WorkspaceParts(c, o);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].name, "activations");  // x, xb, proj; q, att; k, v; gate, up
  EXPECT_EQ(parts[0].bytes, 4ull * 512 * (3 * 4096 + 2 * 4096 + 2 * 4096 + 2 * 11008));
  EXPECT_EQ(parts[1].name, "matmul scratch");  // inputs; per thread a gathered row and a tile
  EXPECT_EQ(parts[1].bytes, 4ull * 512 * 11008 + 2 * 4 * 11008 + 2 * 4ull * 16 * 11008);
  EXPECT_EQ(parts[2].name, "attention scratch");  // per thread: AttentionScratchFloats
  EXPECT_EQ(parts[2].bytes, 2 * 4 * AttentionScratchFloats({32, 32, 128, 0.0f}));
  EXPECT_EQ(parts[3].name, "logits");  // one row per sequence
  EXPECT_EQ(parts[3].bytes, 4ull * 16 * 32000);
  // The parts are CpuWorkspaceLayout's buffers, summed by sub-line.
  const auto layout = CpuWorkspaceLayout(c, {512, 2});
  EXPECT_EQ(parts[0].bytes + parts[1].bytes + parts[2].bytes, LayoutBytes(layout));
  // Fewer batched tokens than sequences: logits rows are bounded by the tokens.
  o.max_num_batched_tokens = 8;
  o.max_num_seqs = 8;
  EXPECT_EQ(WorkspaceParts(c, o)[3].bytes, 4ull * 8 * 32000);
  // A device backend's measured buffers replace the estimate when larger.
  o.host = false;
  o.workspace_floor_bytes = 1ull << 30;
  const auto device = WorkspaceParts(c, o);
  ASSERT_EQ(device.size(), 1u);
  EXPECT_EQ(device[0].bytes, 1ull << 30);
}

// The ledger's KV figures are the cache's own block bytes (KvBlockBytes), for any layer
// count, format and block size.
absl::StatusOr<KvSequenceCost> Cost(const ModelConfig& c, KvDtype dtype, int block_size,
                                    int64_t max_model_len) {
  return KvSequenceCostFor(LedgerKvConfig(c, dtype, KvLayout::kPaged, block_size, max_model_len),
                           512);
}

TEST(MemoryLedger, KvCostIsTheCachesBlockBytes) {
  ModelConfig c = *NamedShape("llama2-7b");
  KvSequenceCost f16 = *Cost(c, KvDtype::kF16, 16, 4096);
  EXPECT_EQ(f16.bytes_per_token, 2ull * 32 * 4096 * 2);
  EXPECT_EQ(f16.bytes_per_block, 16 * f16.bytes_per_token);
  EXPECT_EQ(f16.blocks_per_sequence, 256);
  c.n_layers = 3;
  KvSequenceCost q8 = *Cost(c, KvDtype::kQ8_0, 32, 100);
  EXPECT_EQ(q8.bytes_per_token, 3 * 2ull * 4096 / 32 * 34);
  EXPECT_EQ(q8.blocks_per_sequence, 4);
  KvCacheConfig kc = KvCacheConfigFor(c, KvDtype::kQ8_0);
  kc.block_size = 32;
  EXPECT_EQ(q8.bytes_per_block, *KvBlockBytes(kc));
  // A format the row does not suit (48 values: not whole blocks of 32) is refused.
  c.n_heads = c.n_kv_heads = 2;
  c.head_dim = 24;
  EXPECT_FALSE(Cost(c, KvDtype::kQ8_0, 16, 100).ok());
  EXPECT_TRUE(Cost(c, KvDtype::kF16, 16, 100).ok());
}

// The CPU engine's options for one sequence of 4096 tokens on two threads.
LedgerOptions OneSequenceOnTwoThreads() {
  LedgerOptions o;
  o.max_model_len = 4096;
  o.max_num_seqs = 1;
  o.threads = 2;
  return o;
}

// The pool is the work asked (max_num_seqs sequences of max_model_len) unless the budget is
// smaller; --kv-cache-memory sets it directly.
TEST(MemoryLedger, PoolBoundsWorkBudgetExplicit) {
  PlanInput in = *PlanInputFromShape("llama2-7b", "Q4_0");
  LedgerOptions o = OneSequenceOnTwoThreads();
  o.available_bytes = 64 * kGiB;
  o.available_source = "MemAvailable";
  MemoryLedger work = *ComputeLedger(in, o);
  EXPECT_EQ(work.pool_bound, PoolBound::kWork);
  EXPECT_EQ(work.kv_pool_tokens, 4096);
  EXPECT_EQ(work.kv_pool_bytes, 2 * kGiB);
  EXPECT_EQ(work.PoolBoundText(), "sized for 1 sequence of max_model_len 4096");
  EXPECT_TRUE(work.fits);

  o.max_num_seqs = 16;
  o.available_bytes = 12 * kGiB;
  MemoryLedger budget = *ComputeLedger(in, o);
  EXPECT_EQ(budget.pool_bound, PoolBound::kBudget);
  EXPECT_EQ(budget.budget_bytes, static_cast<uint64_t>(12 * kGiB * 0.9));
  EXPECT_EQ(budget.kv_pool_bytes, (budget.budget_bytes - budget.fixed_bytes()) /
                                      budget.kv_bytes_per_block * budget.kv_bytes_per_block);
  EXPECT_EQ(budget.PoolBoundText(), "capped by 0.90 of 12.00 GiB available (MemAvailable)");

  o.kv_cache_memory = 4 * kGiB + 100;
  MemoryLedger given = *ComputeLedger(in, o);
  EXPECT_EQ(given.pool_bound, PoolBound::kExplicit);
  EXPECT_EQ(given.kv_pool_bytes, 4 * kGiB);
  EXPECT_EQ(given.budget_bytes, given.total_bytes());
  EXPECT_EQ(given.PoolBoundText(), "--kv-cache-memory 4.00 GiB");
  EXPECT_TRUE(given.fits);
}

// On a device the pool is the whole budget left, as vLLM sizes it, however little work is
// asked (the host's work pool would be 1 sequence of 4096 tokens, 2 GiB); --kv-cache-memory
// still sets it directly; a budget that leaves no room for one sequence still does not fit.
TEST(MemoryLedger, DevicePoolIsTheWholeBudget) {
  PlanInput in = *PlanInputFromShape("llama2-7b", "Q4_0");
  LedgerOptions o = OneSequenceOnTwoThreads();
  o.host = false;
  o.reserve_bytes = kDefaultDeviceReserveBytes;
  o.available_bytes = 80 * kGiB;
  o.available_source = "free device memory";
  MemoryLedger whole = *ComputeLedger(in, o);
  EXPECT_EQ(whole.pool_bound, PoolBound::kWholeBudget);
  EXPECT_EQ(whole.budget_bytes, static_cast<uint64_t>(80 * kGiB * 0.9));
  const int64_t blocks =
      static_cast<int64_t>((whole.budget_bytes - whole.fixed_bytes()) / whole.kv_bytes_per_block);
  EXPECT_EQ(whole.kv_pool_blocks, blocks);
  EXPECT_EQ(whole.kv_pool_bytes, static_cast<uint64_t>(blocks) * whole.kv_bytes_per_block);
  EXPECT_EQ(whole.max_concurrency, blocks / 256);  // 256 blocks of 16 per 4096-token sequence
  EXPECT_GT(whole.max_concurrency, 30);
  EXPECT_EQ(whole.PoolBoundText(),
            "the whole budget after the other lines (0.90 of 80.00 GiB available (free device "
            "memory)), as vLLM sizes it");
  EXPECT_TRUE(whole.fits);
  EXPECT_EQ(nlohmann::json::parse(whole.ToJson())["pool_bound"], "whole_budget");

  o.kv_cache_memory = 4 * kGiB + 100;
  MemoryLedger given = *ComputeLedger(in, o);
  EXPECT_EQ(given.pool_bound, PoolBound::kExplicit);
  EXPECT_EQ(given.kv_pool_bytes, 4 * kGiB);
  EXPECT_TRUE(given.fits);

  o.kv_cache_memory = 0;
  o.available_bytes = 6 * kGiB;  // 5.4 GiB: weights, workspace and reserve leave < 2 GiB
  MemoryLedger small = *ComputeLedger(in, o);
  EXPECT_EQ(small.pool_bound, PoolBound::kWholeBudget);
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.message.find("The longest max_model_len that fits is "), std::string::npos)
      << small.message;

  o.host = true;  // the CPU keeps the pool for the work asked
  o.available_bytes = 80 * kGiB;
  EXPECT_EQ(ComputeLedger(in, o)->pool_bound, PoolBound::kWork);
}

// An explicit pool that the memory available cannot hold does not fit: the message says what
// is needed, what is available and the longest max_model_len that fits.
TEST(MemoryLedger, ExplicitPoolOverAvailableDoesNotFit) {
  PlanInput in = *PlanInputFromShape("llama2-7b", "Q4_0");
  LedgerOptions o = OneSequenceOnTwoThreads();
  o.kv_cache_memory = 8 * kGiB;
  o.available_bytes = 5 * kGiB;
  o.available_source = "PINFER_MEMORY_LIMIT 5.00 GiB";
  MemoryLedger l = *ComputeLedger(in, o);
  EXPECT_FALSE(l.fits);
  EXPECT_EQ(l.kv_pool_bytes, 8 * kGiB);
  const uint64_t room = 5 * kGiB - l.fixed_bytes();
  EXPECT_EQ(l.max_model_len_fit, static_cast<int64_t>(room / l.kv_bytes_per_block * 16));
  EXPECT_LT(l.max_model_len_fit, 4096);
  EXPECT_NE(l.message.find("needs " + FormatBytes(l.total_bytes())), std::string::npos)
      << l.message;
  EXPECT_NE(l.message.find("only 5.00 GiB is available (PINFER_MEMORY_LIMIT 5.00 GiB)"),
            std::string::npos)
      << l.message;
  EXPECT_NE(
      l.message.find("longest max_model_len that fits is " + std::to_string(l.max_model_len_fit)),
      std::string::npos)
      << l.message;
  // What it suggests fits.
  o.max_model_len = l.max_model_len_fit;
  o.kv_cache_memory = room;
  EXPECT_TRUE(ComputeLedger(in, o)->fits);
  // A pool too small for one sequence is refused as such, whatever the memory.
  o.max_model_len = 4096;
  o.kv_cache_memory = kGiB;
  o.available_bytes = 0;
  MemoryLedger small = *ComputeLedger(in, o);
  EXPECT_FALSE(small.fits);
  EXPECT_NE(small.message.find("room for no sequence of max_model_len 4096"), std::string::npos)
      << small.message;
}

TEST(MemoryLedger, RejectsUnusableSettings) {
  PlanInput in = *PlanInputFromShape("tiny", "F16");
  LedgerOptions o;
  EXPECT_FALSE(ComputeLedger(in, o).ok());  // no budget, no memory known, no pool given
  o.budget_bytes = kGiB;
  o.block_size = 0;
  EXPECT_FALSE(ComputeLedger(in, o).ok());
  o.block_size = 16;
  o.max_num_batched_tokens = 4;
  o.max_num_seqs = 8;
  absl::StatusOr<MemoryLedger> l = ComputeLedger(in, o);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("max_num_seqs"), std::string_view::npos);
  o.max_num_batched_tokens = 512;
  in.config.n_kv_heads = 1;
  in.config.head_dim = 20;  // K/V rows of 20 values: not a q8_0 row
  o.kv_dtype = KvDtype::kQ8_0;
  EXPECT_FALSE(ComputeLedger(in, o).ok());
  EXPECT_FALSE(PlanInputFromShape("nope", "Q4_0").ok());
  EXPECT_FALSE(PlanInputFromShape("tiny", "Q9").ok());
  EXPECT_EQ(PlanInputFromModelFile("no-such-model.gguf").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(MemoryLedger, JsonAndText) {
  MemoryLedger l = Plan("llama2-7b", "Q4_0", KvDtype::kF16);
  nlohmann::json j = nlohmann::json::parse(l.ToJson());
  EXPECT_EQ(j["weights_bytes"].get<uint64_t>(), l.weights_bytes);
  EXPECT_EQ(j["kv_bytes_per_token"].get<uint64_t>(), 524288u);
  EXPECT_EQ(j["kv_pool_bytes"].get<uint64_t>(), l.kv_pool_bytes);
  EXPECT_EQ(j["kv_pool_tokens"].get<int64_t>(), l.kv_pool_tokens);
  EXPECT_EQ(j["max_concurrency"].get<int64_t>(), l.max_concurrency);
  EXPECT_EQ(j["max_model_len_fit"].get<int64_t>(), l.max_model_len_fit);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["kv_dtype"], "f16");
  EXPECT_EQ(j["pool_bound"], "budget");
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), l.total_bytes());
  EXPECT_EQ(j["workspace"]["activations"].get<uint64_t>(), l.workspace[0].bytes);
  const std::string text = l.ToText();
  EXPECT_NE(text.find("KV pool"), std::string::npos);
  EXPECT_NE(text.find("512.00 KiB"), std::string::npos);
  EXPECT_NE(text.find("fits: yes"), std::string::npos);
}

}  // namespace
}  // namespace pinfer
