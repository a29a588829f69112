// PAGEDINFER_KERNELS: the names it takes, the errors for a set this build or CPU cannot run.
#include "loaders/kernel_set.h"

#include <string>

#include "gtest/gtest.h"

namespace pinfer {
namespace {

TEST(KernelSet, EmptyOrUnsetMeansTheBestSetThisCpuRuns) {
  EXPECT_EQ(*ParseKernelSet(nullptr), BestKernelSet());
  EXPECT_EQ(*ParseKernelSet(""), BestKernelSet());
  EXPECT_TRUE(KernelSetRuns(BestKernelSet()));
  EXPECT_TRUE(KernelSetRuns(KernelSet::kScalar));
#if defined(__x86_64__)
  EXPECT_EQ(BestKernelSet() == KernelSet::kAvx512Vnni, KernelSetRuns(KernelSet::kAvx512Vnni));
  if (!KernelSetRuns(KernelSet::kAvx512Vnni)) {
    EXPECT_EQ(BestKernelSet() == KernelSet::kAvxVnni, KernelSetRuns(KernelSet::kAvxVnni));
  }
  if (!KernelSetRuns(KernelSet::kAvxVnni) && !KernelSetRuns(KernelSet::kAvx512Vnni)) {
    EXPECT_EQ(BestKernelSet() == KernelSet::kAvx2, CpuRunsAvx2Fma16c());
  }
  if (KernelSetRuns(KernelSet::kAvxVnni) || KernelSetRuns(KernelSet::kAvx512Vnni)) {
    EXPECT_TRUE(KernelSetRuns(KernelSet::kAvx2));
  }
#endif
}

TEST(KernelSet, ScalarIsAlwaysThere) {
  const absl::StatusOr<KernelSet> s = ParseKernelSet("scalar");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, KernelSet::kScalar);
  EXPECT_STREQ(KernelSetName(*s), "scalar");
}

TEST(KernelSet, UnknownNamesAndSetsTheCpuCannotRunAreErrorsThatSayWhatToDo) {
  const absl::StatusOr<KernelSet> bad = ParseKernelSet("avx512");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("scalar, avx2, avxvnni, avx512vnni or neon"),
            std::string::npos)
      << bad.status();
  for (KernelSet s :
       {KernelSet::kAvx2, KernelSet::kAvxVnni, KernelSet::kAvx512Vnni, KernelSet::kNeon}) {
    const absl::StatusOr<KernelSet> r = ParseKernelSet(KernelSetName(s));
    EXPECT_EQ(r.ok(), KernelSetRuns(s)) << KernelSetName(s);
    if (!r.ok()) {
      EXPECT_NE(std::string(r.status().message()).find("unset it"), std::string::npos)
          << r.status();
    }
  }
}

TEST(KernelSet, TheActiveSetFollowsTheEnvironment) {
  const absl::StatusOr<KernelSet> env = KernelSetFromEnvironment();
  if (env.ok()) {
    EXPECT_EQ(ActiveKernelSet(), *env);
  }
}

}  // namespace
}  // namespace pinfer
