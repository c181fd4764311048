#include "common/units.h"

#include <gtest/gtest.h>

namespace hangar {
namespace {

TEST(UnitsTest, Memory) {
  EXPECT_EQ(*ParseMemoryMiB("512Mi"), 512);
  EXPECT_EQ(*ParseMemoryMiB("80Gi"), 80 * 1024);
  EXPECT_EQ(*ParseMemoryMiB("80GB"), 80 * 1024);
  EXPECT_EQ(*ParseMemoryMiB("1.5Gi"), 1536);
  EXPECT_EQ(*ParseMemoryMiB("2Ti"), 2 * 1024 * 1024);
  EXPECT_EQ(*ParseMemoryMiB("100"), 100);
  EXPECT_FALSE(ParseMemoryMiB("lots").ok());
  EXPECT_FALSE(ParseMemoryMiB("5Qi").ok());
  EXPECT_FALSE(ParseMemoryMiB("-5Gi").ok());
  EXPECT_EQ(FormatMemoryMiB(80 * 1024), "80Gi");
  EXPECT_EQ(FormatMemoryMiB(1536), "1.5Gi");
}

TEST(UnitsTest, CpuAndGpu) {
  EXPECT_EQ(*ParseMilliCpu("8"), 8000);
  EXPECT_EQ(*ParseMilliCpu("2.5"), 2500);
  EXPECT_EQ(*ParseMilliCpu("500m"), 500);
  EXPECT_FALSE(ParseMilliCpu("8 cores").ok());
  EXPECT_EQ(*ParseMilliGpu("0.25"), 250);
  EXPECT_EQ(*ParseMilliGpu("250m"), 250);
  EXPECT_EQ(FormatMilli(2500), "2.5");
  EXPECT_EQ(FormatMilli(8000), "8");
}

// Issue 16: amounts past int64 used to wrap (100000000000000000000Gi became -9223372036854775808Mi
// and was accepted).
TEST(UnitsTest, AmountsNoMachineHasAreRefusedNotWrapped) {
  auto mem = ParseMemoryMiB("100000000000000000000Gi");
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().message(),
            "'100000000000000000000Gi' is more memory than any machine has (at most 1024Pi); check "
            "the number and its unit");
  EXPECT_TRUE(ParseMemoryMiB("1024Ti").ok());
  EXPECT_FALSE(ParseMilliCpu("1e30").ok());
  EXPECT_FALSE(ParseMilliCpu("99999999999999999999").ok());
  EXPECT_FALSE(ParseMilliGpu("99999999999999999999").ok());
  EXPECT_EQ(*ParseMilliGpu("8"), 8000);
}

}  // namespace
}  // namespace hangar
