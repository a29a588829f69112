// What the host has: the memory the CPU backend may budget from, and what this process holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pinfer {

// Memory available to this process, and where the figure came from.
struct AvailableMemory {
  uint64_t bytes = 0;  // 0 when nothing could be read
  std::string source;  // "MemAvailable", "memory cgroup /docker/x: limit 2.00 GiB", ...
};

// The environment switch that lowers the detected memory (tests; see AvailableHostMemory).
inline constexpr const char* kMemoryLimitEnv = "PINFER_MEMORY_LIMIT";

// The least of:
//   - MemAvailable from /proc/meminfo (free memory plus what the kernel can reclaim);
//   - for each memory cgroup holding this process (v2 memory.max / memory.current, v1
//     memory.limit_in_bytes / memory.usage_in_bytes; the process's own and every ancestor's
//     that is readable), the limit less the usage, page cache (active and inactive file
//     pages) counted as free since the kernel reclaims it before it refuses;
//   - with PINFER_MEMORY_LIMIT=SIZE in the environment ("2GiB", "500000000"), SIZE less this
//     process's anonymous resident memory, as if the process were alone in a cgroup of that
//     limit (a switch for tests: two engines in one process see what the first committed).
// InvalidArgument when PINFER_MEMORY_LIMIT is set and is not a size.
absl::StatusOr<AvailableMemory> AvailableHostMemory();

// One memory cgroup's figures.
struct CgroupMemory {
  std::string path;    // as /proc/self/cgroup names it ("/docker/abc")
  uint64_t limit = 0;  // 0: no limit
  uint64_t usage = 0;
  uint64_t file = 0;  // page cache charged to it (active + inactive file pages)
};

// The cgroups whose memory limits apply to this process (none readable: empty).
std::vector<CgroupMemory> ProcessCgroups();

// AvailableHostMemory's rule on given figures: mem_available from /proc/meminfo (0: unknown),
// the cgroups, the switch's limit (nullopt when unset) and the process's RssAnon.
AvailableMemory CombineAvailable(uint64_t mem_available, const std::vector<CgroupMemory>& cgroups,
                                 std::optional<uint64_t> env_limit, uint64_t rss_anon);

// The "MemAvailable:" line of /proc/meminfo's text, in bytes (0 when absent).
uint64_t ParseMemAvailable(std::string_view meminfo);
// The "RssAnon:" line of /proc/self/status's text, in bytes (0 when absent).
uint64_t ParseRssAnon(std::string_view status);

// This process's anonymous resident memory (RssAnon), in bytes (0 when unreadable).
uint64_t AnonymousResidentBytes();

}  // namespace pinfer
