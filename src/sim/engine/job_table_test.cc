#include "sim/engine/job_table.h"

#include <gtest/gtest.h>

#include "sim/engine/sim_test_util.h"

namespace hangar::sim {
namespace {

using testing::Job;

TEST(JobTableTest, StartsEveryJobFromTheBeginningAndFindsItById) {
  JobTable t;
  t.Add(Job(7, 0, 100, 1));
  t.Add(Job(3, 5, 40, 2));
  ASSERT_TRUE(t.Start(nullptr).ok());
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.IndexOf(3), 1u);
  EXPECT_EQ(t.IndexOf(8), SIZE_MAX);
  EXPECT_EQ(t.at(0).remaining, 100);  // all of its run time left
  EXPECT_EQ(t.result(1).end, kNever);
  t.at(0).order = 2;
  t.at(1).order = 1;
  EXPECT_EQ(t.NextOrder(), 3u);
  // A second run starts over.
  t.at(0).remaining = 0;
  t.result(0).end = 50;
  ASSERT_TRUE(t.Start(nullptr).ok());
  EXPECT_EQ(t.at(0).remaining, 100);
  EXPECT_EQ(t.result(0).end, kNever);
  EXPECT_EQ(t.NextOrder(), 1u);
}

TEST(JobTableTest, RefusesTwoJobsOfOneIdAndAJobWithoutARequest) {
  JobTable twice;
  twice.Add(Job(1, 0, 10, 1));
  twice.Add(Job(1, 1, 10, 1));
  Status s = twice.Start(nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "two jobs have id 1");
  JobTable bare;
  SimJob j = Job(2, 0, 10, 1);
  j.request = nullptr;
  bare.Add(j);
  s = bare.Start(nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "job 'j2' has no request");
}

}  // namespace
}  // namespace hangar::sim
