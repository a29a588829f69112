// Occupancy reports: what the KV pool holds, recomputed from the block tables.
#include "kvcache/occupancy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kvcache/kv_cache_impl.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer {

OccupancyReport KvCache::Report() const {
  const Impl& m = *impl_;
  OccupancyReport r;
  r.dtype = std::string(KvDtypeName(config_.dtype));
  r.layout = std::string(KvLayoutName(config_.layout));
  r.block_size = m.bs;
  r.bytes_per_token = bytes_per_token();
  r.blocks_total = m.num_blocks;
  r.blocks_free = m.alloc.num_free();
  r.blocks_cached = m.prefix ? m.prefix->num_idle() : 0;
  r.blocks_used = r.blocks_total - r.blocks_free - r.blocks_cached;
  r.bytes_reserved = static_cast<uint64_t>(m.num_blocks) * m.block_bytes;
  // Tokens held by each used block; a shared block holds the same tokens for every sequence
  // that references it, so it is counted once.
  std::vector<int32_t> fill(static_cast<size_t>(m.num_blocks), 0);
  for (const auto& [id, s] : m.seqs) {
    const int64_t tokens = s.n_tokens;
    SeqOccupancy so;
    so.id = id;
    so.tokens = tokens;
    so.blocks = static_cast<int64_t>(s.blocks.size());
    so.slots = so.blocks * m.bs;
    so.fragmentation = so.slots - so.tokens;
    r.seqs.push_back(so);
    for (size_t k = 0; k < s.blocks.size(); ++k) {
      const int64_t in_block = std::min<int64_t>(m.bs, tokens - static_cast<int64_t>(k) * m.bs);
      int32_t& f = fill[static_cast<size_t>(s.blocks[k])];
      f = std::max(f, static_cast<int32_t>(in_block));
    }
  }
  for (int32_t f : fill) r.tokens_stored += f;
  r.slots_allocated = r.blocks_used * m.bs;
  r.fragmentation = r.slots_allocated - r.tokens_stored;
  r.bytes_used = static_cast<uint64_t>(r.tokens_stored) * r.bytes_per_token;
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
  return j.dump();
}

}  // namespace pinfer
