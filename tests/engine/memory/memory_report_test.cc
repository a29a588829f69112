#include "engine/memory/memory_report.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pinfer {
namespace {

MemoryReportHeader Header() {
  return {"tiny", "Q4_0", "f16", "paged (blocks of 16 tokens)", "cpu (2 threads)", "0.1.0"};
}

TEST(ParseStatmResident, SecondFieldInPages) {
  absl::StatusOr<uint64_t> r = ParseStatmResident("12345 678 90 1 0 200 0\n", 4096);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 678u * 4096);
  EXPECT_FALSE(ParseStatmResident("", 4096).ok());
  EXPECT_FALSE(ParseStatmResident("12 x", 4096).ok());
}

TEST(ResidentBytes, GrowsWhenMemoryIsTouched) {
  absl::StatusOr<uint64_t> before = ResidentBytes();
  if (!before.ok()) GTEST_SKIP() << before.status();
  EXPECT_GT(*before, 0u);
  constexpr size_t kBytes = 64u << 20;
  std::unique_ptr<char[]> big(new char[kBytes]);
  std::memset(big.get(), 1, kBytes);
  absl::StatusOr<uint64_t> after = ResidentBytes();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(*after, *before + kBytes / 2);
  EXPECT_EQ(big[kBytes - 1], 1);
}

StageRecord Stage(std::string_view name, uint64_t kv_used, uint64_t rss = 0) {
  StageRecord r;
  r.stage = std::string(name);
  r.lines = {{std::string(kLineWeights), 1000, 1000, 1000, "mapped"},
             {std::string(kLineKvCache), 8192, 8192, kv_used, ""}};
  r.rss_bytes = rss;
  return r;
}

TEST(MemoryReport, RecordsStagesAndNamesTheLineThatGrew) {
  MemoryReport r(Header());
  r.Record(Stage(kStageAfterLoad, 0));
  r.Record(Stage(kStageFirstPrefill, 4096, 5u << 20));
  ASSERT_EQ(r.stages().size(), 2u);
  EXPECT_EQ(r.stages()[0].stage, "after load");
  EXPECT_GT(r.stages()[0].rss_bytes, 0u);  // read from /proc on Linux
  EXPECT_EQ(r.stages()[1].rss_bytes, 5u << 20);
  EXPECT_EQ(r.LargestGrowth(0).line, "");
  EXPECT_EQ(r.LargestGrowth(1).line, "kv cache");
  EXPECT_EQ(r.LargestGrowth(1).bytes, 4096u);

  const std::string text = r.ToText();
  EXPECT_NE(text.find("model tiny, weights Q4_0, KV f16, cache paged"), std::string::npos) << text;
  EXPECT_NE(text.find("stage 'first prefill': resident 5.00 MiB; grew most: kv cache"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("predicted"), std::string::npos) << text;
  EXPECT_NE(text.find("8.00 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("mapped"), std::string::npos) << text;

  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["header"]["device"], "cpu (2 threads)");
  EXPECT_EQ(j["header"]["cache_layout"], "paged (blocks of 16 tokens)");
  ASSERT_EQ(j["stages"].size(), 2u);
  EXPECT_EQ(j["stages"][1]["lines"][1]["predicted_bytes"], 8192);
  EXPECT_EQ(j["stages"][1]["lines"][1]["allocated_bytes"], 8192);
  EXPECT_EQ(j["stages"][1]["lines"][1]["used_bytes"], 4096);
  EXPECT_EQ(j["stages"][1]["grew_most"]["line"], "kv cache");
  EXPECT_FALSE(j["stages"][0].contains("grew_most"));
}

TEST(MemoryReport, DifferenceIsResidentLessLedgerAndProcess) {
  MemoryReport r(Header());
  StageRecord s = Stage(kStageWarmUp, 0, 100u << 20);
  s.ledger_bytes = 90u << 20;
  s.process_bytes = 8u << 20;
  EXPECT_EQ(s.difference_bytes(), 2 << 20);
  r.Record(s);
  const std::string text = r.ToText();
  EXPECT_NE(text.find("resident 100.00 MiB; ledger 90.00 MiB + process (binary, libraries, heap "
                      "at start) 8.00 MiB; difference +2.00 MiB (2.00%)"),
            std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(r.ToJson());
  EXPECT_EQ(j["stages"][0]["difference_bytes"], 2 << 20);
  EXPECT_EQ(j["stages"][0]["process_bytes"], 8 << 20);
  // Less resident than the ledger: a negative difference.
  s.rss_bytes = 95u << 20;
  EXPECT_EQ(s.difference_bytes(), -(3 << 20));
  // A device backend's lines are not host memory: no difference is computed.
  s.ledger_bytes = 0;
  EXPECT_EQ(s.difference_bytes(), 0);
}

}  // namespace
}  // namespace pinfer
