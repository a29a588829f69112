// The memory the CPU backend budgets from: the least of MemAvailable, each memory cgroup's
// room (page cache counted as free) and the PINFER_MEMORY_LIMIT switch.
#include "engine/memory/system_memory.h"

#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(SystemMemory, ParsesMeminfoAndStatus) {
  EXPECT_EQ(ParseMemAvailable("MemTotal:       24683584 kB\nMemFree:        22624756 kB\n"
                              "MemAvailable:   23648052 kB\nBuffers:  17516 kB\n"),
            23648052ull * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 10 kB\n"), 0u);
  EXPECT_EQ(ParseRssAnon("VmRSS:\t  1688 kB\nRssAnon:\t     360 kB\nRssFile:  1328 kB\n"),
            360ull * 1024);
  EXPECT_EQ(ParseRssAnon(""), 0u);
  EXPECT_GT(AnonymousResidentBytes(), 0u);  // this test's own heap
}

TEST(SystemMemory, TheLeastOfEverySourceWins) {
  AvailableMemory a = CombineAvailable(1000 * kMiB, {}, std::nullopt, 0);
  EXPECT_EQ(a.bytes, 1000 * kMiB);
  EXPECT_EQ(a.source, "MemAvailable");
  // A cgroup limit of 600 MiB with 300 MiB in use, 100 MiB of it page cache: 400 MiB left.
  std::vector<CgroupMemory> groups = {{"/docker/x", 600 * kMiB, 300 * kMiB, 100 * kMiB},
                                      {"/docker", 0, 900 * kMiB, 0}};  // no limit: ignored
  a = CombineAvailable(1000 * kMiB, groups, std::nullopt, 0);
  EXPECT_EQ(a.bytes, 400 * kMiB);
  EXPECT_NE(a.source.find("memory cgroup /docker/x: limit 600.00 MiB"), std::string::npos)
      << a.source;
  // The switch: its limit less this process's anonymous resident memory.
  a = CombineAvailable(1000 * kMiB, groups, 350 * kMiB, 50 * kMiB);
  EXPECT_EQ(a.bytes, 300 * kMiB);
  EXPECT_NE(a.source.find("PINFER_MEMORY_LIMIT 350.00 MiB"), std::string::npos) << a.source;
  // A limit already exceeded leaves (almost) nothing, never a wrapped-around figure.
  a = CombineAvailable(1000 * kMiB, {}, 10 * kMiB, 50 * kMiB);
  EXPECT_EQ(a.bytes, 1u);
  // Nothing known.
  EXPECT_EQ(CombineAvailable(0, {}, std::nullopt, 0).bytes, 0u);
}

TEST(SystemMemory, TheSwitchLowersWhatTheHostReports) {
  ::setenv(kMemoryLimitEnv, "256MiB", 1);
  absl::StatusOr<AvailableMemory> a = AvailableHostMemory();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_LE(a->bytes, 256 * kMiB);
  EXPECT_GT(a->bytes, 256 * kMiB - AnonymousResidentBytes() - 16 * kMiB);
  EXPECT_NE(a->source.find(kMemoryLimitEnv), std::string::npos);
  ::setenv(kMemoryLimitEnv, "lots", 1);
  a = AvailableHostMemory();
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("PINFER_MEMORY_LIMIT=lots"), std::string_view::npos);
  ::unsetenv(kMemoryLimitEnv);
  a = AvailableHostMemory();
  ASSERT_TRUE(a.ok());
  EXPECT_GT(a->bytes, 0u);  // MemAvailable at least
}

}  // namespace
}  // namespace pinfer
