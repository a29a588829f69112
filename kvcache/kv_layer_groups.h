// How the KV cache splits a model's layers into groups with block tables of their own, so that
// sliding-window layers keep only their window (vLLM's hybrid KV cache groups).
//
// A group is the layers that share one attention rule: full attention (window 0), or one
// sliding-window length. Every block of the pool has the same bytes and holds
// layers_per_block layers (the greatest common divisor of the groups' layer counts, so no
// layer slot is padding); a group of n layers therefore has n / layers_per_block block tables
// per sequence, each table's blocks holding the same positions of its own layers. A model
// without windows has one group and one table whose blocks hold every layer: the layout the
// cache always had.
//
// A window table keeps the blocks a future query can still read: when the next query is at
// position q, a window-w layer reads keys q - w + 1 .. q, so a block whose last position is
// before q - w + 1 is let go (WindowFirstBlock). Decoding (one new position per step), a
// window table therefore holds at most WindowBlocksBound(w, bs, 1) = ceil((w + bs - 1) / bs)
// blocks (ceil(w / bs) + 1 when bs divides w); a step appending c positions at once needs
// WindowBlocksBound(w, bs, c).
//
// The contiguous layout keeps one group holding every layer at full length: its one block
// per sequence of max_model_len slots is a static cache, as a naive implementation reserves
// (a ring of window slots is not implemented), so window layers only mask there.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pinfer {

enum class KvLayout;

struct KvLayerGroup {
  int window = 0;           // 0: full attention; else the sliding window in tokens
  std::vector<int> layers;  // ascending
  int first_table = 0;      // its block tables are first_table .. first_table + tables - 1
  int tables = 0;           // layers.size() / layers_per_block
};

struct KvLayerGroups {
  // Groups from per-layer windows ([n_layers], 0: full; empty: every layer full). Full
  // attention comes first, then windows from the shortest. A window of max_model_len or more
  // never lets a block go, so such layers join the full group; the contiguous layout puts
  // every layer in one full group.
  static KvLayerGroups Make(int n_layers, std::span<const int> windows, KvLayout layout,
                            int max_model_len);

  int n_layers = 0;
  int layers_per_block = 0;
  std::vector<KvLayerGroup> groups;
  std::vector<int> table_group;  // [num_tables()] the group of each table
  std::vector<int> layer_table;  // [n_layers] the table holding the layer's rows
  std::vector<int> layer_slot;   // [n_layers] its index among the layers of a block

  int num_tables() const { return static_cast<int>(table_group.size()); }
  int window_of_table(int t) const { return groups[static_cast<size_t>(table_group[t])].window; }
  bool has_windows() const;
  // "1 full-attention table (8 layers) + 5 window-1024 tables (40 layers), 8 layers per block".
  std::string Describe() const;

  // The most blocks one sequence's tables hold at once when it is `tokens` long and a step
  // appends at most `chunk` positions: full tables ceil(tokens / bs) each, window tables
  // min(that, WindowBlocksBound(window, bs, chunk)) each.
  int64_t MaxBlocksPerSequence(int64_t tokens, int bs, int64_t chunk) const;
  // Group g's share of MaxBlocksPerSequence: over its tables, ceil(tokens / bs) each (full),
  // or min(that, WindowBlocksBound(window, bs, chunk)) each (window).
  int64_t GroupMaxBlocks(size_t g, int64_t tokens, int bs, int64_t chunk) const;
  // The blocks a sequence's tables hold between steps once `tokens` positions are computed
  // and its next query is at position `tokens` (MarkComputed called): full tables
  // ceil(tokens / bs), window tables ceil(tokens / bs) - WindowFirstBlock(window, tokens, bs).
  int64_t BlocksHeld(int64_t tokens, int bs) const;
};

// The first block a window table must hold when no query comes before position `next`:
// floor(max(0, next - window + 1) / bs); 0 for a full table (window 0).
int64_t WindowFirstBlock(int window, int64_t next, int bs);
// The most blocks a window-w table holds for one sequence while a step appends `chunk`
// positions: the window's w - 1 earlier positions and the chunk, starting on a block's last
// slot: ceil((w - 1 + chunk + bs - 1) / bs).
int64_t WindowBlocksBound(int window, int bs, int64_t chunk);

}  // namespace pinfer
