// Memory that is really reserved (issue 15), on a synthetic tiny model: after Engine::Create
// the weights and the KV pool are resident; the memory report's ledger matches the process's
// resident memory at every stage; the default pool is sized for the work asked; and a second
// engine asking for more than the first left refuses at start, saying what it needs, what is
// available and the longest max_model_len that fits (the detected memory is lowered with the
// PINFER_MEMORY_LIMIT switch).
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/cpu/repack.h"
#include "engine/engine.h"
#include "engine/memory/memory_report.h"
#include "engine/memory/system_memory.h"
#include "gtest/gtest.h"
#include "loaders/kernel_set.h"
#include "tests/testing/synth_models.h"
#include "tests/testing/test_models.h"

namespace pinfer {
namespace {

constexpr uint64_t kMiB = 1 << 20;

const Model& Tiny() {
  static const std::unique_ptr<Model> model = testing::SynthModel("tiny", "Q8_0");
  return *model;
}

EngineConfig Config(uint64_t pool_bytes, int max_num_seqs = 2) {
  EngineConfig c;
  c.max_model_len = 256;
  c.max_num_seqs = max_num_seqs;
  c.max_num_batched_tokens = 64;
  c.threads = 2;
  c.reserve_bytes = 8 * kMiB;
  c.kv_cache_memory = pool_bytes;
  return c;
}

// Several requests at once, long enough to pass through prefill, decoding and a peak.
void RunRequests(Engine& e, int n) {
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    for (int t = 0; t < 40 + 7 * i; ++t) r.prompt.push_back(1 + (t * 13 + i) % 500);
    r.params.temperature = 0;
    r.params.max_tokens = 30;
    r.params.ignore_eos = true;
    ASSERT_TRUE(e.AddRequest(r).ok());
  }
  while (e.HasWork()) ASSERT_TRUE(e.Step().ok());
}

// A switch value that leaves `room` bytes for the next engine, given what this process holds.
std::string LimitLeaving(uint64_t room) { return std::to_string(AnonymousResidentBytes() + room); }

TEST(EngineMemory, WeightsAndPoolAreResidentAfterStart) {
  auto e = Engine::Create(Tiny(), Config(48 * kMiB), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  const MemoryLedger& l = (*e)->ledger();
  EXPECT_EQ(l.kv_pool_bytes, 48 * kMiB / l.kv_bytes_per_block * l.kv_bytes_per_block);
  const uint64_t rss = *ResidentBytes();
  EXPECT_GE(rss, l.weights_bytes + l.kv_pool_bytes);
  const WeightResidency w = (*e)->backend().Weights();
  EXPECT_EQ(w.resident, w.bytes);  // every page of the weights faulted in
  EXPECT_GE(w.bytes, l.weights_bytes * 99 / 100);
  // From the file, but for the matrices the CPU backend repacked (engine/cpu/repack.h).
  EXPECT_EQ(w.mapped + w.repacked, w.bytes);
  EXPECT_FALSE(w.locked);
  EXPECT_NE((*e)->pool_summary().find("committed in"), std::string::npos) << (*e)->pool_summary();
  EXPECT_NE((*e)->pool_summary().find("--kv-cache-memory"), std::string::npos);
}

// The report by stage: every line's allocated bytes equal the ledger's prediction (the
// weights to their pages), and the ledger plus the process's own memory (measured once at
// start) is within 1% of the resident set at every stage.
TEST(EngineMemory, LedgerMatchesResidentMemoryAtEveryStage) {
  auto e = Engine::Create(Tiny(), Config(48 * kMiB, 4), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  RunRequests(**e, 6);
  const MemoryReport report = (*e)->memory_report();
  std::vector<std::string> names;
  for (const StageRecord& s : report.stages()) {
    names.push_back(s.stage);
    ASSERT_GT(s.rss_bytes, 0u);
    ASSERT_GT(s.process_bytes, 0u);
    const double diff = static_cast<double>(s.difference_bytes());
    EXPECT_LE(std::abs(diff), 0.01 * static_cast<double>(s.rss_bytes)) << s.stage << "\n"
                                                                       << report.ToText();
    for (const LineUsage& line : s.lines) {
      if (line.line == kLineReserve) continue;  // an allowance, nothing allocated
      if (line.line == kLineWeights) {
        // Whole pages, and the norm vectors between matrices are not in the ranges.
        EXPECT_NEAR(static_cast<double>(line.allocated_bytes),
                    static_cast<double>(line.predicted_bytes), 0.02 * line.predicted_bytes)
            << s.stage;
        continue;
      }
      EXPECT_EQ(line.allocated_bytes, line.predicted_bytes) << s.stage << " " << line.line;
    }
  }
  const std::vector<std::string> want = {"after load", "warm-up", "first prefill", "decoding",
                                         "peak concurrency"};
  EXPECT_EQ(names, want);
  EXPECT_NE(report.ToText().find("difference"), std::string::npos);
  EXPECT_NE(report.ToText().find("the OS may drop these pages"), std::string::npos);
}

TEST(EngineMemory, NoLineGrowsAfterWarmUp) {
  auto e = Engine::Create(Tiny(), Config(16 * kMiB), nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  const uint64_t workspace = (*e)->backend().WorkspaceBytes();
  EXPECT_EQ(workspace + 2ull * 512 * sizeof(float), (*e)->ledger().workspace_bytes);
  RunRequests(**e, 3);
  EXPECT_EQ((*e)->backend().WorkspaceBytes(), workspace);
}

TEST(EngineMemory, DefaultPoolIsSizedForTheWork) {
  EngineConfig c = Config(0, 1);
  auto one = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->ledger().pool_bound, PoolBound::kWork);
  EXPECT_EQ((*one)->ledger().kv_pool_tokens, 256);  // one sequence of max_model_len
  EXPECT_NE((*one)->pool_summary().find("sized for 1 sequence of max_model_len 256"),
            std::string::npos)
      << (*one)->pool_summary();
  c.max_num_seqs = 3;
  auto three = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ((*three)->ledger().kv_pool_tokens, 3 * 256);
}

// With less memory than the work asks for, the pool is capped by memory_utilization of what
// is available, and the start-up line says so.
TEST(EngineMemory, DefaultPoolIsCappedByAvailableMemory) {
  EngineConfig c = Config(0, 64);  // 64 sequences of 256 tokens: more than the room below
  ::setenv(kMemoryLimitEnv, LimitLeaving(40 * kMiB).c_str(), 1);
  auto e = Engine::Create(Tiny(), c, nullptr, true);
  ::unsetenv(kMemoryLimitEnv);
  ASSERT_TRUE(e.ok()) << e.status();
  const MemoryLedger& l = (*e)->ledger();
  EXPECT_EQ(l.pool_bound, PoolBound::kBudget);
  EXPECT_LT(l.kv_pool_blocks, 64 * l.blocks_per_sequence);
  EXPECT_GE(l.max_concurrency, 1);
  EXPECT_LE(l.total_bytes(), 40 * kMiB * 9 / 10);
  EXPECT_NE((*e)->pool_summary().find("capped by 0.90 of"), std::string::npos)
      << (*e)->pool_summary();
  EXPECT_NE((*e)->pool_summary().find(kMemoryLimitEnv), std::string::npos);
}

// Two engines on one machine: the first commits its pool; the second, asking for more than
// what is left, refuses at start (nothing allocated) with what it needs, what is available
// and the longest max_model_len that fits; the configuration it suggests then starts.
TEST(EngineMemory, SecondEngineAskingTooMuchRefusesAtStart) {
  EngineConfig c = Config(64 * kMiB);
  c.max_model_len = 1024;
  c.kv_dtype = KvDtype::kF32;
  auto first = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_TRUE(first.ok()) << first.status();
  const MemoryLedger& l = (*first)->ledger();
  // Room for the fixed lines and three quarters of one max_model_len sequence.
  const uint64_t seq = l.kv_bytes_per_token * 1024;
  ::setenv(kMemoryLimitEnv, LimitLeaving(l.fixed_bytes() + seq * 3 / 4).c_str(), 1);
  const uint64_t anon_before = AnonymousResidentBytes();
  auto second = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(second.status().message());
  EXPECT_NE(msg.find("refusing to start"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is available (PINFER_MEMORY_LIMIT"), std::string::npos) << msg;
  const std::string key = "the longest max_model_len that fits is ";
  const size_t at = msg.find(key);
  ASSERT_NE(at, std::string::npos) << msg;
  const int longest = std::atoi(msg.c_str() + at + key.size());
  EXPECT_GT(longest, 1024 / 2);
  EXPECT_LT(longest, 1024);
  EXPECT_LT(AnonymousResidentBytes(), anon_before + 2 * kMiB);  // refused before committing
  // Its suggestion: that max_model_len, with a pool of one such sequence.
  c.max_model_len = longest;
  c.kv_cache_memory = l.kv_bytes_per_token * longest;
  auto third = Engine::Create(Tiny(), c, nullptr, true);
  ::unsetenv(kMemoryLimitEnv);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*third)->ledger().max_concurrency, 1);
}

// Bytes of this process's resident pages of the mappings of `path` (/proc/self/smaps' Rss).
uint64_t MappedFileResident(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_file = false;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {  // a mapping's header: "start-end perms ... path"
      in_file = line.size() >= path.size() &&
                line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in_file && line.rfind("Rss:", 0) == 0) {
      kib += std::strtoull(line.c_str() + 4, nullptr, 10);
    }
  }
  return kib * 1024;
}

// Repacking does not double the weights: the file's pages of every repacked matrix are
// released (only the partial pages at a matrix's ends may stay), the weights line is the
// packed bytes plus the file bytes that stay, and the memory report says which is which.
TEST(EngineMemory, RepackedMatricesReleaseTheirFilePages) {
  EngineConfig c = Config(4 * kMiB);
  c.repack = false;
  auto plain = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_TRUE(plain.ok()) << plain.status();
  const uint64_t file_resident = MappedFileResident(Tiny().path());
  const uint64_t plain_weights = (*plain)->ledger().weights_bytes;
  plain->reset();
  c.repack = true;
  auto e = Engine::Create(Tiny(), c, nullptr, true);
  ASSERT_TRUE(e.ok()) << e.status();
  const WeightResidency w = (*e)->backend().Weights();
  if (w.repacked == 0) {
    GTEST_SKIP() << "the kernel set " << KernelSetName(ActiveKernelSet())
                 << " has no packed kernel for Q8_0";
  }
  const RepackPlan plan = PlanRepack(Tiny(), ActiveKernelSet());
  EXPECT_EQ(w.repacked, plan.packed_bytes);
  EXPECT_EQ((*e)->ledger().weights_bytes, plain_weights - plan.file_bytes + plan.packed_bytes);
  const uint64_t page = 4096;
  const uint64_t slack = 2 * page * plan.matrices.size();
  const uint64_t after = MappedFileResident(Tiny().path());
  EXPECT_GT(file_resident, plan.file_bytes);
  EXPECT_LE(after, file_resident - plan.file_bytes + slack)
      << "file pages resident " << file_resident << " before, " << after << " after";
  const std::string text = (*e)->memory_report().ToText();
  EXPECT_NE(text.find("held by the CPU backend (repacked at load"), std::string::npos) << text;
  EXPECT_NE((*e)->pool_summary().find("repacked"), std::string::npos) << (*e)->pool_summary();
}

}  // namespace
}  // namespace pinfer
