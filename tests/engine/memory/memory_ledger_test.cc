#include "engine/memory/memory_ledger.h"

#include "engine/memory/model_plan.h"
#include "engine/model/model_shapes.h"
#include "gtest/gtest.h"
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
  o.max_num_seqs = 1;
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
  EXPECT_EQ(l.blocks_per_sequence, 2);
  EXPECT_EQ(l.max_concurrency, 2);
  EXPECT_EQ(l.max_model_len_fit, 80);
}

TEST(MemoryLedger, TooSmallSaysWhatIsNeededAndTheLongestThatFits) {
  // mistral-7b at its full 32k context in 6 GiB with 1 GiB reserve.
  MemoryLedger l = Plan("mistral-7b", "Q4_K_M", KvDtype::kF16, 6 * kGiB);
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

TEST(MemoryLedger, BudgetBelowWeightsLeavesNoPool) {
  MemoryLedger l = Plan("llama2-7b", "F16", KvDtype::kF16, 8 * kGiB);
  EXPECT_FALSE(l.fits);
  EXPECT_EQ(l.kv_pool_bytes, 0u);
  EXPECT_EQ(l.max_model_len_fit, 0);
  EXPECT_NE(l.message.find("does not even cover"), std::string::npos) << l.message;
}

TEST(MemoryLedger, WorkspaceFollowsTheDocumentedFormula) {
  ModelConfig c = *NamedShape("llama2-7b");
  WorkspaceBreakdown w = WorkspaceBytes(c, 2048, 16, 4096);
  EXPECT_EQ(w.activations, 4ull * 2048 * (4 * 4096 + 2 * 4096 + 2 * 4096 + 2 * 11008 + 11008));
  EXPECT_EQ(w.logits, 4ull * 2 * 16 * 32000);
  EXPECT_EQ(w.scores, 4ull * kLedgerScoreRows * 4096);
  EXPECT_EQ(w.rope, 4ull * 4096 * 128);
  // Fewer batched tokens than sequences: logits rows are bounded by the tokens.
  EXPECT_EQ(WorkspaceBytes(c, 8, 8, 4096).logits, 4ull * 2 * 8 * 32000);
}

TEST(MemoryLedger, RejectsUnusableSettings) {
  PlanInput in = *PlanInputFromShape("tiny", "F16");
  LedgerOptions o;
  EXPECT_FALSE(ComputeLedger(in, o).ok());  // no budget
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
  const std::string text = l.ToText();
  EXPECT_NE(text.find("KV pool"), std::string::npos);
  EXPECT_NE(text.find("512.00 KiB"), std::string::npos);
  EXPECT_NE(text.find("fits: yes"), std::string::npos);
}

}  // namespace
}  // namespace pinfer
