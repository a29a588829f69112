// Layer groups: which layers get tables of their own, how many layers a block holds, and the
// block arithmetic of sliding windows, against hand-computed figures.
#include "kvcache/kv_layer_groups.h"

#include <vector>

#include "gtest/gtest.h"
#include "kvcache/kv_cache.h"

namespace pinfer {
namespace {

// llama.cpp's set_swa_pattern with period n: every n-th layer (from 1) is full attention.
std::vector<int> Pattern(int n_layers, int window, int period) {
  std::vector<int> w(static_cast<size_t>(n_layers), window);
  for (int l = 0; l < n_layers; ++l) {
    if (period > 0 && l % period == period - 1) w[static_cast<size_t>(l)] = 0;
  }
  return w;
}

TEST(KvLayerGroups, Gemma3TwelveBHasOneFullTableAndFiveWindowTablesOfEightLayers) {
  const std::vector<int> w = Pattern(48, 1024, 6);
  const KvLayerGroups g = KvLayerGroups::Make(48, w, KvLayout::kPaged, 32768);
  ASSERT_EQ(g.groups.size(), 2u);
  EXPECT_EQ(g.layers_per_block, 8);
  EXPECT_EQ(g.num_tables(), 6);
  EXPECT_EQ(g.groups[0].window, 0);
  EXPECT_EQ(g.groups[0].layers, (std::vector<int>{5, 11, 17, 23, 29, 35, 41, 47}));
  EXPECT_EQ(g.groups[0].tables, 1);
  EXPECT_EQ(g.groups[1].window, 1024);
  EXPECT_EQ(g.groups[1].layers.size(), 40u);
  EXPECT_EQ(g.groups[1].first_table, 1);
  EXPECT_EQ(g.groups[1].tables, 5);
  // Layer 12 is the third window layer of the second block's worth: table 1 + 10 / 8, slot 2.
  EXPECT_EQ(g.layer_table[12], 2);
  EXPECT_EQ(g.layer_slot[12], 2);
  EXPECT_EQ(g.layer_table[47], 0);
  EXPECT_EQ(g.layer_slot[47], 7);
  EXPECT_EQ(g.Describe(),
            "1 full-attention table (8 layers) + 5 window-1024 tables (40 layers), "
            "8 layers per block");
  // At 32768 tokens: 2048 blocks of the full table; a window table ceil((1024 + 15) / 16) =
  // 65 while decoding, ceil((1023 + 512 + 15) / 16) = 97 with prefill steps of 512.
  EXPECT_EQ(g.MaxBlocksPerSequence(32768, 16, 1), 2048 + 5 * 65);
  EXPECT_EQ(g.MaxBlocksPerSequence(32768, 16, 512), 2048 + 5 * 97);
  EXPECT_EQ(g.MaxBlocksPerSequence(100, 16, 512), 6 * 7);  // shorter than the window
}

TEST(KvLayerGroups, Gemma3FourBHasOneLayerPerBlock) {
  // 34 layers: 5 full (5, 11, 17, 23, 29), 29 window; gcd(5, 29) = 1, so no padding.
  const KvLayerGroups g = KvLayerGroups::Make(34, Pattern(34, 1024, 6), KvLayout::kPaged, 8192);
  EXPECT_EQ(g.layers_per_block, 1);
  EXPECT_EQ(g.num_tables(), 34);
  EXPECT_EQ(g.groups[0].tables, 5);
  EXPECT_EQ(g.groups[1].tables, 29);
}

TEST(KvLayerGroups, OneTableWithoutWindowsOrWhenWindowsNeverLetGo) {
  for (const KvLayerGroups& g : {
           KvLayerGroups::Make(32, {}, KvLayout::kPaged, 4096),
           // Mistral 7B v0.1 at max_model_len 4096: the 4096 window never lets a block go.
           KvLayerGroups::Make(32, std::vector<int>(32, 4096), KvLayout::kPaged, 4096),
           // The contiguous layout keeps every layer at full length.
           KvLayerGroups::Make(48, Pattern(48, 1024, 6), KvLayout::kContiguous, 32768),
       }) {
    EXPECT_EQ(g.num_tables(), 1);
    EXPECT_EQ(g.layers_per_block, g.n_layers);
    EXPECT_FALSE(g.has_windows());
    EXPECT_EQ(g.layer_slot[3], 3);
  }
  // Mistral at 32768: every layer a window layer, still one table.
  const KvLayerGroups m =
      KvLayerGroups::Make(32, std::vector<int>(32, 4096), KvLayout::kPaged, 32768);
  EXPECT_EQ(m.num_tables(), 1);
  EXPECT_TRUE(m.has_windows());
  EXPECT_EQ(m.MaxBlocksPerSequence(32768, 16, 1), 257);  // ceil((4096 + 15) / 16)
}

TEST(KvLayerGroups, WindowArithmetic) {
  // The next query at q reads q - w + 1 .. q: the block of that first position on.
  EXPECT_EQ(WindowFirstBlock(0, 1000, 16), 0);
  EXPECT_EQ(WindowFirstBlock(64, 63, 16), 0);
  EXPECT_EQ(WindowFirstBlock(64, 79, 16), 1);  // first position 16
  EXPECT_EQ(WindowFirstBlock(64, 78, 16), 0);  // first position 15
  // w positions starting on a block's last slot: 1 + ceil((w - 1) / bs) blocks.
  EXPECT_EQ(WindowBlocksBound(64, 16, 1), 5);
  EXPECT_EQ(WindowBlocksBound(49, 16, 1), 4);
  EXPECT_EQ(WindowBlocksBound(32, 16, 1), 3);
  EXPECT_EQ(WindowBlocksBound(1, 16, 1), 1);
  EXPECT_EQ(WindowBlocksBound(32, 16, 40), 6);  // 71 positions from a block's last slot
  // Held between steps: tiny-gemma3's shape (5 window-32 layers, 1 full; one layer a block).
  const KvLayerGroups g = KvLayerGroups::Make(6, Pattern(6, 32, 6), KvLayout::kPaged, 1024);
  ASSERT_EQ(g.num_tables(), 6);
  EXPECT_EQ(g.BlocksHeld(0, 16), 0);
  EXPECT_EQ(g.BlocksHeld(16, 16), 6);
  EXPECT_EQ(g.BlocksHeld(40, 16), 6 * 3);      // the next query (40) reads 9..40: blocks 0..2
  EXPECT_EQ(g.BlocksHeld(47, 16), 3 + 5 * 2);  // 47 reads 16..47: blocks 1, 2 of 0..2
  EXPECT_EQ(g.BlocksHeld(1000, 16), 63 + 5 * 3);
}

KvCacheConfig TinyConfig(std::vector<int> windows) {
  KvCacheConfig c;
  c.n_layers = static_cast<int>(windows.size());
  c.n_kv_heads = 1;
  c.head_dim = 1;
  c.dtype = KvDtype::kF32;  // 4-byte rows: a block of one layer is 2 x 16 x 4 = 128 bytes
  c.layer_windows = std::move(windows);
  return c;
}

TEST(KvLongestSequence, WithoutWindowsIsThePoolsTokens) {
  KvCacheConfig c = TinyConfig({0, 0});  // blocks of 2 layers: 256 bytes
  EXPECT_EQ(KvLongestSequence(c, 256 * 10 + 255, 512, 1 << 20), 160);
  c.layout = KvLayout::kContiguous;  // one block of L slots: 16 bytes a token
  EXPECT_EQ(KvLongestSequence(c, 256 * 10 + 255, 512, 1 << 20), 175);
  EXPECT_EQ(KvLongestSequence(c, 256 * 10, 512, 100), 100);  // capped by the limit
  EXPECT_EQ(KvLongestSequence(c, 10, 512, 100), 0);
}

TEST(KvLongestSequence, WindowLayersCostTheirWindowPastIt) {
  // tiny-gemma3's pattern: 5 window-32 layers, 1 full. Up to L = 32 one table of 6 layers
  // (768-byte blocks); past it 6 tables of one layer (128-byte blocks). 100 small blocks:
  // decoding, ceil(L / 16) + 5 x 3 <= 100, so L = 85 x 16; steps of 40 positions make a window
  // table's bound 6 blocks: ceil(L / 16) <= 70.
  const KvCacheConfig c = TinyConfig({32, 32, 32, 32, 32, 0});
  EXPECT_EQ(KvLongestSequence(c, 128 * 100, 1, 1 << 20), 85 * 16);
  EXPECT_EQ(KvLongestSequence(c, 128 * 100, 40, 1 << 20), 70 * 16);
  // 767 bytes hold no 768-byte block and 5 small ones (a sequence past the window needs 18):
  // nothing fits; 768 bytes hold one block of the first range, 16 tokens.
  EXPECT_EQ(KvLongestSequence(c, 767, 1, 1 << 20), 0);
  EXPECT_EQ(KvLongestSequence(c, 768, 1, 1 << 20), 16);
  // Every layer a window: any length fits once the window's blocks do.
  EXPECT_EQ(KvLongestSequence(TinyConfig({32, 32}), 256 * 3, 1, 5000), 5000);
  EXPECT_EQ(KvLongestSequence(TinyConfig({32, 32}), 256 * 2, 1, 5000), 32);
}

}  // namespace
}  // namespace pinfer
