#include "controller/state/step_book.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(StepBookTest, StepsAreNumberedPerJobAndEndWithTheirLastTasksWorstStatus) {
  StepBook book;
  EXPECT_EQ(book.Begin(7, "hostname", "node-[1-2]", 2, 2, 1000), 0u);
  EXPECT_EQ(book.Begin(7, "python", "node-1", 1, 1, 1100), 1u);
  EXPECT_EQ(book.Begin(8, "true", "node-3", 1, 1, 1200), 0u) << "each job counts its own steps";
  EXPECT_FALSE(book.TaskEnded(7, 0, 3, 0, 1500));
  EXPECT_EQ(book.Steps(7)[0].State(), "RUNNING");
  EXPECT_TRUE(book.TaskEnded(7, 0, 0, 0, 2000));
  auto steps = book.Steps(7);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].State(), "FAILED");
  EXPECT_EQ(steps[0].exit_code, 3);
  EXPECT_EQ(steps[0].end, 2000);
  EXPECT_TRUE(book.TaskEnded(7, 1, 0, 0, 2100));
  EXPECT_EQ(book.Steps(7)[1].State(), "COMPLETED");
  book.MarkCancelled(8, 0);
  EXPECT_TRUE(book.TaskEnded(8, 0, 0, 1, 2200));
  EXPECT_EQ(book.Steps(8)[0].State(), "CANCELLED");
  EXPECT_FALSE(book.TaskEnded(8, 0, 0, 0, 2300)) << "an ended step takes no more ends";
  EXPECT_TRUE(book.Steps(9).empty());
}

}  // namespace
}  // namespace hangar::controller
