#include "common/random.h"

#include <gtest/gtest.h>

#include <vector>

namespace hangar {
namespace {

TEST(RandomTest, SameSeedSameStream) {
  Random a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs = differs || x != c.Next();
  }
  EXPECT_TRUE(differs);
}

TEST(RandomTest, UniformIsInRangeAndCoversIt) {
  Random r(7);
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 10000; ++i) {
    uint64_t v = r.Uniform(10);
    ASSERT_LT(v, 10u);
    seen[v]++;
  }
  for (int n : seen) EXPECT_GT(n, 800);
  for (int i = 0; i < 1000; ++i) {
    double d = r.UniformDouble();
    EXPECT_GE(d, 0.0);
    EXPECT_LT(d, 1.0);
  }
}

}  // namespace
}  // namespace hangar
