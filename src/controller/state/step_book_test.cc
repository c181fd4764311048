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

namespace hangar::controller {
namespace {

TEST(StepBookTest, AJobsStepsComeBackFromTheirRowAndARunningOneAsCancelled) {
  StepBook book;
  book.Begin(7, "python3", "node-[1-2]", 2, 4, 1000);
  for (int i = 0; i < 4; ++i) book.TaskEnded(7, 0, i == 2 ? 3 : 0, 0, 5000);
  book.Begin(7, "bash", "node-1", 1, 1, 6000);  // still running when the controller stops
  const std::string row = book.RowValue(7);

  StepBook restored;
  restored.Restore("7", row, 9000);
  const auto steps = restored.Steps(7);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].job_id, 7u);
  EXPECT_EQ(steps[0].name, "python3");
  EXPECT_EQ(steps[0].nodelist, "node-[1-2]");
  EXPECT_EQ(steps[0].ntasks, 4);
  EXPECT_EQ(steps[0].end, 5000);
  EXPECT_EQ(steps[0].State(), "FAILED");
  EXPECT_EQ(steps[0].exit_code, 3);
  EXPECT_EQ(steps[1].State(), "CANCELLED");
  EXPECT_EQ(steps[1].end, 9000);
  // The next step of the job is numbered after them.
  EXPECT_EQ(restored.Begin(7, "true", "node-1", 1, 1, 9500), 2u);
  // What does not parse is skipped, and nothing else is lost.
  restored.Restore("8", "not json", 9000);
  restored.Restore("x", "[]", 9000);
  restored.Restore("9", R"([{"step": 1}])", 9000);  // not numbered from 0
  EXPECT_TRUE(restored.Steps(8).empty());
  EXPECT_TRUE(restored.Steps(9).empty());
  EXPECT_EQ(restored.Steps(7).size(), 3u);
}

}  // namespace
}  // namespace hangar::controller
