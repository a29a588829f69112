#include "loaders/byte_size.h"

#include "gtest/gtest.h"

namespace pinfer {
namespace {

TEST(FormatBytes, Units) {
  EXPECT_EQ(FormatBytes(100), "100 B");
  EXPECT_EQ(FormatBytes(65536), "64.00 KiB");
  EXPECT_EQ(FormatBytes(524288), "512.00 KiB");
  EXPECT_EQ(FormatBytes(16ull << 30), "16.00 GiB");
  EXPECT_EQ(FormatBytes(3825065984ull), "3.56 GiB");
}

TEST(ParseBytes, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseBytes("16GiB"), 16ull << 30);
  EXPECT_EQ(*ParseBytes("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("4G"), 4ull << 30);
  EXPECT_EQ(*ParseBytes("64KiB"), 65536u);
  EXPECT_EQ(*ParseBytes("1.5GB"), 1500000000u);
  EXPECT_EQ(*ParseBytes("1000000"), 1000000u);
  EXPECT_EQ(*ParseBytes("7B"), 7u);
  for (const char* bad : {"", "GiB", "-1GiB", "lots", "4XB"}) {
    absl::StatusOr<uint64_t> v = ParseBytes(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("is not a size"), std::string_view::npos) << v.status();
  }
}

}  // namespace
}  // namespace pinfer
