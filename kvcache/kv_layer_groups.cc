// Layer groups of the KV cache and the block arithmetic of sliding windows.
#include "kvcache/kv_layer_groups.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kvcache/kv_cache.h"

namespace pinfer {

int64_t WindowFirstBlock(int window, int64_t next, int bs) {
  if (window <= 0) return 0;
  return std::max<int64_t>(0, next - window + 1) / bs;
}

int64_t WindowBlocksBound(int window, int bs, int64_t chunk) {
  return (int64_t{window} - 1 + chunk + bs - 1 + bs - 1) / bs;
}

KvLayerGroups KvLayerGroups::Make(int n_layers, std::span<const int> windows, KvLayout layout,
                                  int max_model_len) {
  KvLayerGroups g;
  g.n_layers = n_layers;
  // window -> layers; std::map orders full attention (0) first, then windows ascending.
  std::map<int, std::vector<int>> by_window;
  for (int l = 0; l < n_layers; ++l) {
    int w = static_cast<size_t>(l) < windows.size() ? windows[static_cast<size_t>(l)] : 0;
    if (layout == KvLayout::kContiguous || w < 0 || w >= max_model_len) w = 0;
    by_window[w].push_back(l);
  }
  int per_block = 0;
  for (const auto& [w, layers] : by_window) {
    per_block = std::gcd(per_block, static_cast<int>(layers.size()));
  }
  g.layers_per_block = std::max(per_block, 1);
  g.layer_table.assign(static_cast<size_t>(n_layers), 0);
  g.layer_slot.assign(static_cast<size_t>(n_layers), 0);
  for (auto& [w, layers] : by_window) {
    KvLayerGroup group;
    group.window = w;
    group.first_table = g.num_tables();
    group.tables = static_cast<int>(layers.size()) / g.layers_per_block;
    for (size_t i = 0; i < layers.size(); ++i) {
      const int table = group.first_table + static_cast<int>(i) / g.layers_per_block;
      if (i % static_cast<size_t>(g.layers_per_block) == 0) {
        g.table_group.push_back(static_cast<int>(g.groups.size()));
      }
      g.layer_table[static_cast<size_t>(layers[i])] = table;
      g.layer_slot[static_cast<size_t>(layers[i])] =
          static_cast<int>(i % static_cast<size_t>(g.layers_per_block));
    }
    group.layers = std::move(layers);
    g.groups.push_back(std::move(group));
  }
  return g;
}

bool KvLayerGroups::has_windows() const {
  return std::any_of(groups.begin(), groups.end(),
                     [](const KvLayerGroup& grp) { return grp.window > 0; });
}

std::string KvLayerGroups::Describe() const {
  std::string out;
  for (const KvLayerGroup& grp : groups) {
    absl::StrAppend(&out, out.empty() ? "" : " + ", grp.tables,
                    grp.window > 0 ? absl::StrCat(" window-", grp.window) : " full-attention",
                    grp.tables == 1 ? " table (" : " tables (", grp.layers.size(),
                    grp.layers.size() == 1 ? " layer)" : " layers)");
  }
  absl::StrAppend(&out, ", ", layers_per_block,
                  layers_per_block == 1 ? " layer per block" : " layers per block");
  return out;
}

int64_t KvLayerGroups::GroupMaxBlocks(size_t g, int64_t tokens, int bs, int64_t chunk) const {
  const KvLayerGroup& grp = groups[g];
  const int64_t all = (tokens + bs - 1) / bs;
  const int64_t each =
      grp.window > 0 ? std::min(all, WindowBlocksBound(grp.window, bs, chunk)) : all;
  return each * grp.tables;
}

int64_t KvLayerGroups::MaxBlocksPerSequence(int64_t tokens, int bs, int64_t chunk) const {
  int64_t blocks = 0;
  for (size_t g = 0; g < groups.size(); ++g) blocks += GroupMaxBlocks(g, tokens, bs, chunk);
  return blocks;
}

int64_t KvLayerGroups::BlocksHeld(int64_t tokens, int bs) const {
  const int64_t all = (tokens + bs - 1) / bs;
  int64_t blocks = 0;
  for (const KvLayerGroup& grp : groups) {
    blocks += (all - WindowFirstBlock(grp.window, tokens, bs)) * grp.tables;
  }
  return blocks;
}

}  // namespace pinfer
