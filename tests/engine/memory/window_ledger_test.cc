// The ledger and sliding windows: a window layer group costs at most its window's blocks per
// sequence (kvcache's KvSequenceBlocks, the rule the cache holds itself to), so the pool,
// the concurrency and the longest max_model_len that fit count windows; `plan` shows the
// saving against the same model with the windows ignored.
#include <string>

#include "engine/memory/memory_ledger.h"
#include "engine/model/model_shapes.h"
#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"
#include "kvcache/kv_layer_groups.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

MemoryLedger Ledger(std::string_view shape, int64_t max_model_len, int64_t chunk,
                    uint64_t kv_cache_memory = 0, int max_num_seqs = 1) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape(shape, "F32");
  EXPECT_TRUE(in.ok()) << in.status();
  LedgerOptions o;
  o.max_model_len = max_model_len;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = chunk;
  o.threads = 1;
  o.available_bytes = 64 * kGiB;
  o.available_source = "test";
  o.kv_cache_memory = kv_cache_memory;
  absl::StatusOr<MemoryLedger> l = ComputeLedger(*in, o);
  EXPECT_TRUE(l.ok()) << l.status();
  return *l;
}

// tiny-mistral-swa: 4 layers, every one with a 32-token window, so one table whose blocks
// hold all 4 layers. Decoding (a chunk of 1) a sequence holds ceil(32 / 16) + 1 = 3 blocks
// however long it is; a step of 16 tokens at once ceil((31 + 16 + 15) / 16) = 4; the windows
// ignored, a 256-token sequence takes 16.
TEST(WindowLedger, AWindowLayerCostsItsWindowsBlocks) {
  const MemoryLedger decode = Ledger("tiny-mistral-swa", 256, 1);
  EXPECT_EQ(decode.kv_tables, 1);
  EXPECT_EQ(decode.blocks_per_sequence, 32 / 16 + 1);
  EXPECT_EQ(decode.blocks_per_sequence_full, 16);
  EXPECT_EQ(decode.kv_bytes_per_block, 4u * 2 * 16 * 2 * 32 * 2);  // layers, K+V, slots, row f16
  EXPECT_EQ(decode.kv_bytes_per_token, decode.kv_bytes_per_block / 16);
  EXPECT_EQ(decode.kv_layer_groups, "1 window-32 table (4 layers), 4 layers per block");
  const MemoryLedger chunked = Ledger("tiny-mistral-swa", 256, 16);
  EXPECT_EQ(chunked.blocks_per_sequence, 4);
  EXPECT_EQ(chunked.blocks_per_sequence, WindowBlocksBound(32, 16, 16));
  // A window no shorter than max_model_len never lets a block go: full attention.
  const MemoryLedger short_seqs = Ledger("tiny-mistral-swa", 32, 1);
  EXPECT_EQ(short_seqs.blocks_per_sequence, 2);
  EXPECT_TRUE(short_seqs.kv_layer_groups.empty());
}

// tiny-gemma2: two window layers and two full ones; blocks of two layers, a full table and a
// window table per sequence. 256 tokens decoding: 16 full blocks + 3 window blocks (32
// windows ignored).
TEST(WindowLedger, FullAndWindowGroupsAddUp) {
  const MemoryLedger l = Ledger("tiny-gemma2", 256, 1);
  EXPECT_EQ(l.kv_tables, 2);
  EXPECT_EQ(l.blocks_per_sequence, 16 + 3);
  EXPECT_EQ(l.blocks_per_sequence_full, 32);
  EXPECT_EQ(l.kv_bytes_per_token * 16, 2 * l.kv_bytes_per_block);
  // The pool for the work asked is max_num_seqs of those sequences, and holds that many.
  const MemoryLedger four = Ledger("tiny-gemma2", 256, 4, 0, 4);
  EXPECT_EQ(four.pool_bound, PoolBound::kWork);
  EXPECT_EQ(four.blocks_per_sequence, 16 + WindowBlocksBound(32, 16, 4));
  EXPECT_EQ(four.kv_pool_blocks, 4 * four.blocks_per_sequence);
  EXPECT_EQ(four.max_concurrency, 4);
  EXPECT_EQ(four.kv_pool_tokens, four.kv_pool_blocks * 16 / 2);
}

// An explicit pool of 16 blocks: one 256-token sequence with the windows ignored, four with
// them (4 blocks each at a 16-token chunk); and since every layer has a window, any length
// fits (the limit: the model's context).
TEST(WindowLedger, ConcurrencyAndLongestFitCountTheWindows) {
  const uint64_t block = Ledger("tiny-mistral-swa", 256, 16).kv_bytes_per_block;
  const MemoryLedger l = Ledger("tiny-mistral-swa", 256, 16, 16 * block, 4);
  EXPECT_TRUE(l.fits) << l.message;
  EXPECT_EQ(l.kv_pool_blocks, 16);
  EXPECT_EQ(l.max_concurrency, 4);
  EXPECT_EQ(l.max_model_len_fit, 1024);
  // tiny-gemma2's full layers bound the length: 40 blocks less its window table's 4 (a chunk
  // of 16) leave 36 full blocks, 576 tokens.
  const uint64_t g2 = Ledger("tiny-gemma2", 256, 16).kv_bytes_per_block;
  const MemoryLedger gemma = Ledger("tiny-gemma2", 256, 16, 40 * g2);
  EXPECT_EQ(gemma.max_model_len_fit, 36 * 16);
  KvCacheConfig kc =
      LedgerKvConfig(*NamedShape("tiny-gemma2"), KvDtype::kF16, KvLayout::kPaged, 16, 256);
  EXPECT_EQ(gemma.max_model_len_fit, KvLongestSequence(kc, 40 * g2, 16, 1024));
}

// The contiguous layout reserves max_model_len for every layer (a window only masks there).
TEST(WindowLedger, TheContiguousLayoutIgnoresWindows) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape("tiny-gemma2", "F32");
  ASSERT_TRUE(in.ok());
  LedgerOptions o;
  o.kv_layout = KvLayout::kContiguous;
  o.block_size = 256;
  o.max_model_len = 256;
  o.max_num_seqs = 1;
  o.available_bytes = 64 * kGiB;
  const MemoryLedger l = *ComputeLedger(*in, o);
  EXPECT_EQ(l.kv_tables, 1);
  EXPECT_EQ(l.blocks_per_sequence, 1);
  EXPECT_TRUE(l.kv_layer_groups.empty());
  EXPECT_EQ(l.kv_bytes_per_block, 4u * 2 * 256 * 2 * 64 * 2);
}

// gemma3-12b at 32768 tokens (8 full layers, 40 of a 1024-token window; blocks of 8 layers):
// a sequence holds 2048 full blocks and 5 window tables of ceil((1023 + 512 + 15) / 16) = 97
// blocks at plan's 512-token steps, 2533 blocks against 6 x 2048 = 12288 with the windows
// ignored: 79.4% less. plan's table says so.
TEST(WindowLedger, PlanShowsGemma3sWindowSaving) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape("gemma3-12b", "Q4_0");
  ASSERT_TRUE(in.ok()) << in.status();
  LedgerOptions o;
  o.max_model_len = 32768;
  o.max_num_seqs = 1;
  o.threads = 1;
  o.budget_bytes = 64 * kGiB;
  const MemoryLedger l = *ComputeLedger(*in, o);
  EXPECT_EQ(l.kv_layer_groups,
            "1 full-attention table (8 layers) + 5 window-1024 tables (40 layers), 8 layers per "
            "block");
  EXPECT_EQ(l.blocks_per_sequence, 2048 + 5 * 97);
  EXPECT_EQ(l.blocks_per_sequence_full, 6 * 2048);
  EXPECT_EQ(l.kv_pool_blocks, 2048 + 5 * 97);
  EXPECT_EQ(l.kv_bytes_per_block, 8u * 2 * 16 * 8 * 256 * 2);
  const std::string text = l.ToText();
  EXPECT_NE(text.find("sliding windows: 1 full-attention table"), std::string::npos) << text;
  EXPECT_NE(text.find("the windows save 79.4%"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(l.ToJson());
  EXPECT_EQ(j["blocks_per_sequence"], 2533);
  EXPECT_EQ(j["blocks_per_sequence_full"], 12288);
}

// The pool split between the layer groups, as plan and the memory report print it: the same
// gemma3-12b on a device with a 64 GiB budget, whose pool is the whole budget left (57827
// blocks of 1 MiB): 22 sequences of 32768 hold 22 x 2048 blocks of full-attention layers and
// 22 x 485 of window layers; the rest is no group's (one shared pool: any group takes it).
TEST(WindowLedger, ThePoolSplitsBetweenTheGroupsAtThePlannedConcurrency) {
  absl::StatusOr<PlanInput> in = PlanInputFromShape("gemma3-12b", "Q4_0");
  ASSERT_TRUE(in.ok()) << in.status();
  LedgerOptions o;
  o.host = false;
  o.reserve_bytes = kDefaultDeviceReserveBytes;
  o.max_model_len = 32768;
  o.budget_bytes = 64 * kGiB;
  const MemoryLedger l = *ComputeLedger(*in, o);
  ASSERT_EQ(l.kv_groups.size(), 2u);
  EXPECT_EQ(l.kv_pool_blocks, 57827);
  EXPECT_EQ(l.max_concurrency, 22);
  const KvGroupLine& full = l.kv_groups[0];
  const KvGroupLine& window = l.kv_groups[1];
  EXPECT_EQ(full.window, 0);
  EXPECT_EQ(full.layers, 8);
  EXPECT_EQ(full.tables, 1);
  EXPECT_EQ(full.blocks_per_sequence, 2048);
  EXPECT_EQ(full.pool_blocks, 22 * 2048);
  EXPECT_EQ(full.pool_bytes, 22ull * 2048 * l.kv_bytes_per_block);
  EXPECT_EQ(window.window, 1024);
  EXPECT_EQ(window.layers, 40);
  EXPECT_EQ(window.tables, 5);
  EXPECT_EQ(window.blocks_per_sequence, 5 * 97);
  EXPECT_EQ(window.pool_blocks, 22 * 485);
  EXPECT_EQ(l.kv_blocks_spare, 57827 - 22 * 2048 - 22 * 485);
  EXPECT_EQ(full.pool_blocks + window.pool_blocks + l.kv_blocks_spare, l.kv_pool_blocks);
  const std::string text = l.ToText();
  EXPECT_NE(text.find("the pool by layer group at 22 sequences of max_model_len 32768"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("full attention: 8 layers, 1 table"), std::string::npos) << text;
  EXPECT_NE(text.find("45056 blocks    44.00 GiB  (2048 a sequence)"), std::string::npos) << text;
  EXPECT_NE(text.find("window 1024: 40 layers, 5 tables"), std::string::npos) << text;
  EXPECT_NE(text.find("10670 blocks    10.42 GiB  (485 a sequence)"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(l.ToJson());
  ASSERT_EQ(j["kv_groups"].size(), 2u);
  EXPECT_EQ(j["kv_groups"][1]["window"], 1024);
  EXPECT_EQ(j["kv_groups"][1]["pool_blocks"], 22 * 485);
  EXPECT_EQ(j["kv_groups"][0]["pool_bytes"], full.pool_bytes);
  EXPECT_EQ(j["kv_blocks_spare"], l.kv_blocks_spare);
}

}  // namespace
}  // namespace pinfer
