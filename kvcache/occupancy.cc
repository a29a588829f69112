// Occupancy reports: what the KV pool holds, recomputed from the block tables.
#include "kvcache/occupancy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kvcache/kv_cache_impl.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer {

namespace {

// Slots each used block has filled: a shared block holds the same positions for every
// sequence that references it, so it counts once. Fills the sequences' figures on the way.
std::vector<int32_t> BlockFills(const KvCache::Impl& m, std::vector<SeqOccupancy>* seqs) {
  std::vector<int32_t> fill(static_cast<size_t>(m.num_blocks), 0);
  for (const auto& [id, s] : m.seqs) {
    SeqOccupancy so;
    so.id = id;
    so.tokens = s.n_tokens;
    int64_t filled = 0;
    for (const std::vector<int32_t>& table : s.tables) {
      for (size_t k = 0; k < table.size(); ++k) {
        if (table[k] == kNoBlock) continue;
        const int64_t in_block =
            std::min<int64_t>(m.bs, s.n_tokens - static_cast<int64_t>(k) * m.bs);
        int32_t& f = fill[static_cast<size_t>(table[k])];
        f = std::max(f, static_cast<int32_t>(in_block));
        ++so.blocks;
        filled += in_block;
      }
    }
    so.slots = so.blocks * m.bs;
    so.fragmentation = so.slots - filled;
    seqs->push_back(so);
  }
  return fill;
}

// Each group's distinct used blocks and their filled slots.
std::vector<GroupOccupancy> GroupFigures(const KvCache::Impl& m, const std::vector<int32_t>& fill) {
  std::vector<GroupOccupancy> out;
  for (const KvLayerGroup& g : m.groups.groups) {
    out.push_back({g.window, static_cast<int>(g.layers.size()), g.tables, 0, 0});
  }
  std::vector<bool> seen(static_cast<size_t>(m.num_blocks), false);
  for (const auto& [id, s] : m.seqs) {
    for (int t = 0; t < m.groups.num_tables(); ++t) {
      GroupOccupancy& g = out[static_cast<size_t>(m.groups.table_group[static_cast<size_t>(t)])];
      for (int32_t b : s.tables[static_cast<size_t>(t)]) {
        if (b == kNoBlock || seen[static_cast<size_t>(b)]) continue;
        seen[static_cast<size_t>(b)] = true;
        ++g.blocks_used;
        g.tokens_stored += fill[static_cast<size_t>(b)];
      }
    }
  }
  return out;
}

}  // namespace

OccupancyReport KvCache::Report() const {
  const Impl& m = *impl_;
  OccupancyReport r;
  r.dtype = std::string(KvDtypeName(config_.dtype));
  r.layout = std::string(KvLayoutName(config_.layout));
  r.block_size = m.bs;
  r.bytes_per_token = bytes_per_token();
  r.slot_bytes = m.block_bytes / static_cast<size_t>(m.bs);
  r.blocks_total = m.num_blocks;
  r.blocks_free = m.alloc.num_free();
  r.blocks_cached = m.prefix ? m.prefix->num_idle() : 0;
  r.blocks_used = r.blocks_total - r.blocks_free - r.blocks_cached;
  r.bytes_reserved = static_cast<uint64_t>(m.num_blocks) * m.block_bytes;
  const std::vector<int32_t> fill = BlockFills(m, &r.seqs);
  for (int32_t f : fill) r.tokens_stored += f;
  r.groups = GroupFigures(m, fill);
  r.slots_allocated = r.blocks_used * m.bs;
  r.fragmentation = r.slots_allocated - r.tokens_stored;
  r.bytes_used = static_cast<uint64_t>(r.tokens_stored) * r.slot_bytes;
  return r;
}

std::string OccupancyReport::ToText() const {
  std::string out = absl::StrFormat(
      "KV cache: %s, %s, %d tokens/block, %d bytes/token\n"
      "blocks: %d total, %d used, %d cached (idle), %d free\n"
      "tokens: %d stored in %d slots (fragmentation %d slots)\n"
      "bytes:  %d used of %d reserved (%.1f%%)\n",
      dtype, layout, block_size, bytes_per_token, blocks_total, blocks_used, blocks_cached,
      blocks_free, tokens_stored, slots_allocated, fragmentation, bytes_used, bytes_reserved,
      100.0 * utilization());
  if (groups.size() > 1 || (groups.size() == 1 && groups[0].window > 0)) {
    for (const GroupOccupancy& g : groups) {
      absl::StrAppend(
          &out,
          absl::StrFormat("group %s: %d layers in %d tables, %d blocks used, %d slots filled\n",
                          g.window > 0 ? absl::StrCat("window ", g.window) : "full attention",
                          g.layers, g.tables, g.blocks_used, g.tokens_stored));
    }
  }
  if (!seqs.empty()) {
    absl::StrAppend(&out, absl::StrFormat("%10s %8s %8s %8s %8s\n", "seq", "tokens", "slots",
                                          "blocks", "frag"));
    for (const SeqOccupancy& s : seqs) {
      absl::StrAppend(&out, absl::StrFormat("%10d %8d %8d %8d %8d\n", s.id, s.tokens, s.slots,
                                            s.blocks, s.fragmentation));
    }
  }
  return out;
}

std::string OccupancyReport::ToJson() const {
  nlohmann::json j;
  j["dtype"] = dtype;
  j["layout"] = layout;
  j["block_size"] = block_size;
  j["bytes_per_token"] = bytes_per_token;
  j["slot_bytes"] = slot_bytes;
  j["blocks_total"] = blocks_total;
  j["blocks_used"] = blocks_used;
  j["blocks_free"] = blocks_free;
  j["blocks_cached"] = blocks_cached;
  j["tokens_stored"] = tokens_stored;
  j["slots_allocated"] = slots_allocated;
  j["fragmentation"] = fragmentation;
  j["bytes_reserved"] = bytes_reserved;
  j["bytes_used"] = bytes_used;
  j["utilization"] = utilization();
  nlohmann::json seq_list = nlohmann::json::array();
  for (const SeqOccupancy& s : seqs) {
    seq_list.push_back({{"id", s.id},
                        {"tokens", s.tokens},
                        {"slots", s.slots},
                        {"blocks", s.blocks},
                        {"fragmentation", s.fragmentation}});
  }
  j["seqs"] = std::move(seq_list);
  nlohmann::json group_list = nlohmann::json::array();
  for (const GroupOccupancy& g : groups) {
    group_list.push_back({{"window", g.window},
                          {"layers", g.layers},
                          {"tables", g.tables},
                          {"blocks_used", g.blocks_used},
                          {"tokens_stored", g.tokens_stored}});
  }
  j["groups"] = std::move(group_list);
  return j.dump();
}

}  // namespace pinfer
