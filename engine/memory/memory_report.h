// A report of memory by stage: at named points of a run (after load, warm-up, first prefill,
// decoding, peak concurrency) the bytes each ledger line has allocated and reserved, and the
// process's resident memory, under a header naming what ran. All sizes are in bytes.
//
// The engine records stages; a failure report then names the stage and the line that grew.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

// Stage names the engine uses.
inline constexpr std::string_view kStageAfterLoad = "after load";
inline constexpr std::string_view kStageWarmUp = "warm-up";
inline constexpr std::string_view kStageFirstPrefill = "first prefill";
inline constexpr std::string_view kStageDecoding = "decoding";
inline constexpr std::string_view kStagePeakConcurrency = "peak concurrency";

// Ledger line names.
inline constexpr std::string_view kLineWeights = "weights";
inline constexpr std::string_view kLineKvCache = "kv cache";
inline constexpr std::string_view kLineWorkspace = "workspace";
inline constexpr std::string_view kLineReserve = "runtime reserve";
inline constexpr std::string_view kLineGraphs = "cuda graphs";  // only with captured graphs

struct MemoryReportHeader {
  std::string model;          // e.g. "llama2-7b" or the file name
  std::string weight_format;  // "Q4_K_M"
  std::string kv_format;      // "f16"
  std::string cache_layout;   // "paged (blocks of 16 tokens)" or "contiguous"
  std::string device;         // "cpu (16 threads)", "NVIDIA H200"
  std::string version;        // BuildInfo()
};

struct LineUsage {
  std::string line;
  uint64_t allocated_bytes = 0;  // in use by live data (KV: blocks holding tokens)
  uint64_t reserved_bytes = 0;   // set aside for the line (KV: the whole pool)
};

struct StageRecord {
  std::string stage;
  std::vector<LineUsage> lines;
  uint64_t rss_bytes = 0;  // resident set of the process (0 when unknown)
};

class MemoryReport {
 public:
  explicit MemoryReport(MemoryReportHeader header) : header_(std::move(header)) {}

  // Records a stage with the process's current resident memory (0 if it cannot be read).
  void Record(std::string_view stage, std::vector<LineUsage> lines);
  // Records a stage with a given resident size (tests, remote devices).
  void Record(std::string_view stage, std::vector<LineUsage> lines, uint64_t rss_bytes);

  const MemoryReportHeader& header() const { return header_; }
  const std::vector<StageRecord>& stages() const { return stages_; }

  // The line whose allocated bytes grew most from the previous stage to stage i, and by how
  // much; empty name when nothing grew (or i is 0: the first stage is compared with nothing).
  struct Growth {
    std::string line;
    uint64_t bytes = 0;
  };
  Growth LargestGrowth(size_t i) const;

  std::string ToText() const;  // header, then one table per stage
  std::string ToJson() const;  // {"header": {...}, "stages": [{stage, rss_bytes, lines}]}

 private:
  MemoryReportHeader header_;
  std::vector<StageRecord> stages_;
};

// Resident set size from the text of /proc/self/statm ("size resident shared ...", in pages).
absl::StatusOr<uint64_t> ParseStatmResident(std::string_view statm, uint64_t page_bytes);
// The calling process's resident set size, in bytes, from /proc/self/statm.
absl::StatusOr<uint64_t> ResidentBytes();

}  // namespace pinfer
