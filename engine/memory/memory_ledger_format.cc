// The ledger as a table for people and as JSON for scripts.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/memory/memory_ledger.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

std::string Row(std::string_view label, uint64_t bytes, std::string_view note = "") {
  std::string row = absl::StrFormat("  %-26s %12s %16d", Sv(label), FormatBytes(bytes), bytes);
  if (!note.empty()) absl::StrAppend(&row, "  ", Sv(note));
  return row + "\n";
}

}  // namespace

std::string MemoryLedger::ToText() const {
  std::string out = absl::StrFormat(
      "memory ledger: %s (%s), KV %s, blocks of %d tokens, max_model_len %d, max_num_seqs %d, "
      "max_num_batched_tokens %d\n",
      model_name, weight_format, Sv(KvDtypeName(kv_dtype)), block_size, max_model_len, max_num_seqs,
      max_num_batched_tokens);
  absl::StrAppend(&out, absl::StrFormat("  %-26s %12s %16s\n", "line", "size", "bytes"));
  absl::StrAppend(&out, Row("budget", budget_bytes, budget_source));
  absl::StrAppend(&out, Row("weights", weights_bytes));
  for (const WeightLine& w : weights) {
    absl::StrAppend(&out, Row(absl::StrCat("  ", w.type, " (", w.tensors, " tensors)"), w.bytes));
  }
  absl::StrAppend(&out, Row("workspace", workspace_bytes,
                            host ? absl::StrCat("cpu, ", threads, " threads") : "device"));
  for (const WorkspacePart& p : workspace) {
    absl::StrAppend(&out, Row(absl::StrCat("  ", p.name), p.bytes));
  }
  absl::StrAppend(&out, Row("runtime reserve", reserve_bytes));
  if (graph_bytes > 0)
    absl::StrAppend(&out, Row("cuda graphs", graph_bytes, "set aside for capture"));
  absl::StrAppend(&out, Row("KV pool", kv_pool_bytes,
                            absl::StrCat(kv_pool_blocks, " blocks, ", kv_pool_tokens, " tokens; ",
                                         PoolBoundText())));
  absl::StrAppend(&out, Row("total", total_bytes()));
  if (available_bytes > 0) {
    absl::StrAppend(&out, Row("available", available_bytes, available_source));
  }
  absl::StrAppend(&out, absl::StrFormat("  KV per token: %s (%d bytes); per block: %s\n",
                                        FormatBytes(kv_bytes_per_token), kv_bytes_per_token,
                                        FormatBytes(kv_bytes_per_block)));
  absl::StrAppend(
      &out,
      absl::StrFormat("  sequences of max_model_len %d at once: %d (%d blocks each); "
                      "longest max_model_len that fits: %d tokens\n",
                      max_model_len, max_concurrency, blocks_per_sequence, max_model_len_fit));
  if (!kv_layer_groups.empty()) {
    const uint64_t window_bytes = static_cast<uint64_t>(blocks_per_sequence) * kv_bytes_per_block;
    const uint64_t full_bytes =
        static_cast<uint64_t>(blocks_per_sequence_full) * kv_bytes_per_block;
    absl::StrAppend(
        &out,
        absl::StrFormat("  sliding windows: %s; a sequence of max_model_len holds at most "
                        "%d blocks (%s); with the windows ignored, %d blocks (%s): the windows "
                        "save %.1f%%\n",
                        kv_layer_groups, blocks_per_sequence, FormatBytes(window_bytes),
                        blocks_per_sequence_full, FormatBytes(full_bytes),
                        100.0 * (1 - static_cast<double>(window_bytes) / full_bytes)));
  }
  if (!kv_layer_groups.empty()) {
    absl::StrAppend(&out, absl::StrFormat("  the pool by layer group at %d sequences of "
                                          "max_model_len %d (one pool of equal blocks: any "
                                          "group takes any free block):\n",
                                          max_concurrency, max_model_len));
    for (const KvGroupLine& g : kv_groups) {
      const std::string name = absl::StrCat(
          g.window > 0 ? absl::StrCat("window ", g.window) : std::string("full attention"), ": ",
          g.layers, g.layers == 1 ? " layer, " : " layers, ", g.tables,
          g.tables == 1 ? " table" : " tables");
      absl::StrAppend(
          &out, absl::StrFormat("    %-36s %8d blocks %12s  (%d a sequence)\n", name, g.pool_blocks,
                                FormatBytes(g.pool_bytes), g.blocks_per_sequence));
    }
    absl::StrAppend(&out, absl::StrFormat("    %-36s %8d blocks %12s\n",
                                          "spare (no group's at that count)", kv_blocks_spare,
                                          FormatBytes(static_cast<uint64_t>(kv_blocks_spare) *
                                                      kv_bytes_per_block)));
  }
  absl::StrAppend(&out, "  fits: ", fits ? "yes" : "no", "\n");
  if (!message.empty()) absl::StrAppend(&out, "  ", message, "\n");
  return out;
}

std::string MemoryLedger::ToJson() const {
  nlohmann::json weights_by_type = nlohmann::json::array();
  for (const WeightLine& w : weights) {
    weights_by_type.push_back({{"type", w.type}, {"tensors", w.tensors}, {"bytes", w.bytes}});
  }
  nlohmann::json workspace_parts = nlohmann::json::object();
  for (const WorkspacePart& p : workspace) workspace_parts[p.name] = p.bytes;
  nlohmann::json groups = nlohmann::json::array();
  for (const KvGroupLine& g : kv_groups) {
    groups.push_back({{"window", g.window},
                      {"layers", g.layers},
                      {"tables", g.tables},
                      {"blocks_per_sequence", g.blocks_per_sequence},
                      {"pool_blocks", g.pool_blocks},
                      {"pool_bytes", g.pool_bytes}});
  }
  static constexpr const char* kBounds[] = {"work", "budget", "explicit", "whole_budget"};
  nlohmann::json j = {
      {"model", model_name},
      {"weight_format", weight_format},
      {"kv_dtype", std::string(KvDtypeName(kv_dtype))},
      {"kv_layout", std::string(KvLayoutName(kv_layout))},
      {"block_size", block_size},
      {"max_model_len", max_model_len},
      {"max_num_seqs", max_num_seqs},
      {"max_num_batched_tokens", max_num_batched_tokens},
      {"device", host ? "cpu" : "device"},
      {"threads", threads},
      {"available_bytes", available_bytes},
      {"available_source", available_source},
      {"budget_bytes", budget_bytes},
      {"budget_source", budget_source},
      {"weights_bytes", weights_bytes},
      {"weights_by_type", weights_by_type},
      {"workspace_bytes", workspace_bytes},
      {"workspace", workspace_parts},
      {"reserve_bytes", reserve_bytes},
      {"graph_bytes", graph_bytes},
      {"kv_bytes_per_token", kv_bytes_per_token},
      {"kv_bytes_per_block", kv_bytes_per_block},
      {"kv_tables", kv_tables},
      {"kv_layer_groups", kv_layer_groups},
      {"kv_pool_bytes", kv_pool_bytes},
      {"kv_pool_blocks", kv_pool_blocks},
      {"kv_pool_tokens", kv_pool_tokens},
      {"pool_bound", kBounds[static_cast<int>(pool_bound)]},
      {"pool_bound_text", PoolBoundText()},
      {"total_bytes", total_bytes()},
      {"blocks_per_sequence", blocks_per_sequence},
      {"blocks_per_sequence_full", blocks_per_sequence_full},
      {"max_concurrency", max_concurrency},
      {"max_model_len_fit", max_model_len_fit},
      {"kv_groups", groups},
      {"kv_blocks_spare", kv_blocks_spare},
      {"fits", fits},
      {"message", message},
  };
  return j.dump(2);
}

}  // namespace pinfer
