// Memory by stage: recording, /proc/self/statm, and text / JSON output.
#include "engine/memory/memory_report.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/memory/memory_ledger.h"
#include "loaders/absl_compat.h"
#include "nlohmann/json.hpp"

namespace pinfer {

absl::StatusOr<uint64_t> ParseStatmResident(std::string_view statm, uint64_t page_bytes) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(Sv(statm), absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
  uint64_t pages = 0;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &pages)) {
    return absl::InternalError(
        absl::StrCat("cannot read the resident size from /proc/self/statm ('", Sv(statm),
                     "'); expected 'size resident ...' in pages"));
  }
  return pages * page_bytes;
}

absl::StatusOr<uint64_t> ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  if (!in) {
    return absl::UnavailableError(
        "cannot open /proc/self/statm (not Linux, or /proc not mounted); resident size unknown");
  }
  std::stringstream text;
  text << in.rdbuf();
  const long page = sysconf(_SC_PAGESIZE);
  return ParseStatmResident(text.str(), page > 0 ? static_cast<uint64_t>(page) : 4096);
}

void MemoryReport::Record(std::string_view stage, std::vector<LineUsage> lines) {
  absl::StatusOr<uint64_t> rss = ResidentBytes();
  Record(stage, std::move(lines), rss.ok() ? *rss : 0);
}

void MemoryReport::Record(std::string_view stage, std::vector<LineUsage> lines,
                          uint64_t rss_bytes) {
  stages_.push_back(StageRecord{std::string(stage), std::move(lines), rss_bytes});
}

MemoryReport::Growth MemoryReport::LargestGrowth(size_t i) const {
  Growth g;
  if (i == 0 || i >= stages_.size()) return g;
  for (const LineUsage& now : stages_[i].lines) {
    uint64_t before = 0;
    for (const LineUsage& prev : stages_[i - 1].lines) {
      if (prev.line == now.line) before = prev.allocated_bytes;
    }
    if (now.allocated_bytes > before && now.allocated_bytes - before > g.bytes) {
      g = Growth{now.line, now.allocated_bytes - before};
    }
  }
  return g;
}

std::string MemoryReport::ToText() const {
  const MemoryReportHeader& h = header_;
  std::string out = absl::StrCat("memory report: model ", h.model, ", weights ", h.weight_format,
                                 ", KV ", h.kv_format, ", cache ", h.cache_layout, ", device ",
                                 h.device, ", version ", h.version, "\n");
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageRecord& s = stages_[i];
    absl::StrAppend(&out, "stage '", s.stage, "': resident ",
                    s.rss_bytes ? FormatBytes(s.rss_bytes) : std::string("unknown"));
    if (Growth g = LargestGrowth(i); !g.line.empty()) {
      absl::StrAppend(&out, "; grew most: ", g.line, " (+", FormatBytes(g.bytes), ")");
    }
    absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, absl::StrFormat("  %-18s %14s %14s\n", "line", "allocated", "reserved"));
    for (const LineUsage& l : s.lines) {
      absl::StrAppend(&out,
                      absl::StrFormat("  %-18s %14s %14s\n", l.line, FormatBytes(l.allocated_bytes),
                                      FormatBytes(l.reserved_bytes)));
    }
  }
  return out;
}

std::string MemoryReport::ToJson() const {
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageRecord& s = stages_[i];
    nlohmann::json lines = nlohmann::json::array();
    for (const LineUsage& l : s.lines) {
      lines.push_back({{"line", l.line},
                       {"allocated_bytes", l.allocated_bytes},
                       {"reserved_bytes", l.reserved_bytes}});
    }
    nlohmann::json stage = {{"stage", s.stage}, {"rss_bytes", s.rss_bytes}, {"lines", lines}};
    if (Growth g = LargestGrowth(i); !g.line.empty()) {
      stage["grew_most"] = {{"line", g.line}, {"bytes", g.bytes}};
    }
    stages.push_back(std::move(stage));
  }
  const MemoryReportHeader& h = header_;
  nlohmann::json j = {{"header",
                       {{"model", h.model},
                        {"weight_format", h.weight_format},
                        {"kv_format", h.kv_format},
                        {"cache_layout", h.cache_layout},
                        {"device", h.device},
                        {"version", h.version}}},
                      {"stages", stages}};
  return j.dump(2);
}

}  // namespace pinfer
