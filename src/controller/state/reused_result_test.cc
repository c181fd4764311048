#include "controller/state/reused_result.h"

#include <gtest/gtest.h>

#include <string>

namespace hangar::controller {
namespace {

TEST(ReusedResultTest, KeptForTwentyTimesWhatItTookAtMostTwoSeconds) {
  ReusedResult<std::string> r;
  EXPECT_EQ(r.Fresh(0), nullptr) << "nothing kept yet";
  r.Keep("walk", 1'000, 1'500);  // took 500 ns: kept until 1,000 + 10,000
  ASSERT_NE(r.Fresh(10'999), nullptr);
  EXPECT_EQ(*r.Fresh(10'999), "walk");
  EXPECT_EQ(r.Fresh(11'000), nullptr);
  r.Keep("slow", 0, 1'000'000'000);  // took 1 s: kept 2 s, not 20
  EXPECT_NE(r.Fresh(1'999'999'999), nullptr);
  EXPECT_EQ(r.Fresh(2'000'000'000), nullptr);
}

}  // namespace
}  // namespace hangar::controller
