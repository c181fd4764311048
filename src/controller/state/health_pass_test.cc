#include "controller/state/health_pass.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(HealthPassTest, DueOnAChangeOrOnceAnInterval) {
  HealthPass p;
  EXPECT_TRUE(p.Due(500, 500)) << "never run: due once the interval has passed since 0";
  p.Begin(500);
  EXPECT_FALSE(p.Due(600, 500));
  p.Touch();
  EXPECT_TRUE(p.Due(600, 500));
  p.Begin(600);
  EXPECT_FALSE(p.Due(1099, 500)) << "a change is taken by the evaluation that begins after it";
  EXPECT_TRUE(p.Due(1100, 500));
  p.draining_gpus().insert(3);
  EXPECT_EQ(p.draining_gpus().count(3), 1u);
}

}  // namespace
}  // namespace hangar::controller
