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

int64_t StageRecord::difference_bytes() const {
  if (rss_bytes == 0 || ledger_bytes == 0) return 0;
  return static_cast<int64_t>(rss_bytes) - static_cast<int64_t>(ledger_bytes + process_bytes);
}

void MemoryReport::Record(StageRecord record) {
  if (record.rss_bytes == 0) record.rss_bytes = ResidentBytes().value_or(0);
  stages_.push_back(std::move(record));
}

MemoryReport::Growth MemoryReport::LargestGrowth(size_t i) const {
  Growth g;
  if (i == 0 || i >= stages_.size()) return g;
  for (const LineUsage& now : stages_[i].lines) {
    uint64_t before = 0;
    for (const LineUsage& prev : stages_[i - 1].lines) {
      if (prev.line == now.line) before = prev.used_bytes;
    }
    if (now.used_bytes > before && now.used_bytes - before > g.bytes) {
      g = Growth{now.line, now.used_bytes - before};
    }
  }
  return g;
}

namespace {

// "resident 4.12 GiB; ledger 4.09 GiB + process 21.30 MiB; difference +1.20 MiB (0.03%)".
std::string ResidentText(const StageRecord& s) {
  if (s.rss_bytes == 0) return "resident unknown";
  std::string out = absl::StrCat("resident ", FormatBytes(s.rss_bytes));
  if (s.ledger_bytes == 0) return out;
  const int64_t d = s.difference_bytes();
  absl::StrAppend(&out, "; ledger ", FormatBytes(s.ledger_bytes),
                  " + process (binary, libraries, "
                  "heap at start) ",
                  FormatBytes(s.process_bytes), "; difference ", d < 0 ? "-" : "+",
                  FormatBytes(static_cast<uint64_t>(d < 0 ? -d : d)),
                  absl::StrFormat(" (%.2f%%)", 100.0 * static_cast<double>(d) /
                                                   static_cast<double>(s.rss_bytes)));
  return out;
}

}  // namespace

std::string MemoryReport::ToText() const {
  const MemoryReportHeader& h = header_;
  std::string out = absl::StrCat("memory report: model ", h.model, ", weights ", h.weight_format,
                                 ", KV ", h.kv_format, ", cache ", h.cache_layout, ", device ",
                                 h.device, ", version ", h.version, "\n");
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageRecord& s = stages_[i];
    absl::StrAppend(&out, "stage '", s.stage, "': ", ResidentText(s));
    if (Growth g = LargestGrowth(i); !g.line.empty()) {
      absl::StrAppend(&out, "; grew most: ", g.line, " (+", FormatBytes(g.bytes), ")");
    }
    absl::StrAppend(&out, "\n");
    absl::StrAppend(&out, absl::StrFormat("  %-18s %12s %12s %12s\n", "line", "predicted",
                                          "allocated", "in use"));
    for (const LineUsage& l : s.lines) {
      absl::StrAppend(
          &out, absl::StrFormat("  %-18s %12s %12s %12s", l.line, FormatBytes(l.predicted_bytes),
                                FormatBytes(l.allocated_bytes), FormatBytes(l.used_bytes)));
      absl::StrAppend(&out, l.note.empty() ? "" : absl::StrCat("  ", l.note), "\n");
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
                       {"predicted_bytes", l.predicted_bytes},
                       {"allocated_bytes", l.allocated_bytes},
                       {"used_bytes", l.used_bytes},
                       {"note", l.note}});
    }
    nlohmann::json stage = {{"stage", s.stage},
                            {"rss_bytes", s.rss_bytes},
                            {"process_bytes", s.process_bytes},
                            {"ledger_bytes", s.ledger_bytes},
                            {"difference_bytes", s.difference_bytes()},
                            {"lines", lines}};
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
