// The API key check: equal keys only, whatever their lengths or where they differ.
#include "server/auth.h"

#include <gtest/gtest.h>

#include <string>

namespace pinfer::server {
namespace {

TEST(AuthTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "S3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  const std::string with_nul("ab\0c", 4);
  EXPECT_FALSE(ConstantTimeEquals(with_nul, "ab"));
  EXPECT_TRUE(ConstantTimeEquals(with_nul, std::string("ab\0c", 4)));
}

TEST(AuthTest, BearerMatchesOnlyTheExactKey) {
  const std::string_view ok = "Bearer k3y";
  EXPECT_TRUE(BearerMatches(&ok, "k3y"));
  for (std::string_view bad :
       {"Bearer k3", "Bearer k3yy", "bearer k3y", "Bearer  k3y", "k3y", "Basic k3y", "Bearer "}) {
    EXPECT_FALSE(BearerMatches(&bad, "k3y")) << bad;
  }
  EXPECT_FALSE(BearerMatches(nullptr, "k3y"));
}

}  // namespace
}  // namespace pinfer::server
