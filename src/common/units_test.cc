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

}  // namespace
}  // namespace hangar
