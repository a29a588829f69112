// A report of memory by stage: at named points of a run (after load, warm-up, first prefill,
// decoding, peak concurrency), for each ledger line the bytes the ledger predicted, the bytes
// the backend allocated and the bytes holding live data; beside them the process's measured
// resident memory, its own memory (binary, libraries, heap: measured once at start) and the
// difference between the two and the ledger's total, under a header naming what ran. All
// sizes are in bytes.
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
  uint64_t predicted_bytes = 0;  // the ledger's line
  uint64_t allocated_bytes = 0;  // held for the line now (weights: resident pages; KV: the
                                 // committed pool; the reserve, an allowance: 0)
  uint64_t used_bytes = 0;       // holding live data (KV: blocks holding tokens), else allocated
  std::string note;              // e.g. which pages the OS may drop
};

struct StageRecord {
  std::string stage;
  std::vector<LineUsage> lines;
  uint64_t rss_bytes = 0;  // resident set of the process (0 when unknown)
  // Host memory only (0 for a device backend's lines): the process's own memory measured once
  // at start, and the sum of the host lines' allocated bytes.
  uint64_t process_bytes = 0;
  uint64_t ledger_bytes = 0;
  // rss - (ledger + process): what the ledger does not account for (0 when unknown).
  int64_t difference_bytes() const;
};

class MemoryReport {
 public:
  explicit MemoryReport(MemoryReportHeader header) : header_(std::move(header)) {}

  // Records a stage, reading the process's resident memory now (0 if it cannot be read) when
  // record.rss_bytes is 0.
  void Record(StageRecord record);

  const MemoryReportHeader& header() const { return header_; }
  const std::vector<StageRecord>& stages() const { return stages_; }

  // The line whose used bytes grew most from the previous stage to stage i, and by how
  // much; empty name when nothing grew (or i is 0: the first stage is compared with nothing).
  struct Growth {
    std::string line;
    uint64_t bytes = 0;
  };
  Growth LargestGrowth(size_t i) const;

  std::string ToText() const;  // header, then one table per stage
  // {"header": {...}, "stages": [{stage, rss_bytes, process_bytes, ledger_bytes,
  //  difference_bytes, lines: [{line, predicted_bytes, allocated_bytes, used_bytes, note}]}]}
  std::string ToJson() const;

 private:
  MemoryReportHeader header_;
  std::vector<StageRecord> stages_;
};

// Resident set size from the text of /proc/self/statm ("size resident shared ...", in pages).
absl::StatusOr<uint64_t> ParseStatmResident(std::string_view statm, uint64_t page_bytes);
// The calling process's resident set size, in bytes, from /proc/self/statm.
absl::StatusOr<uint64_t> ResidentBytes();

}  // namespace pinfer
