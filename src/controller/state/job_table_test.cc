#include "controller/state/job_table.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace hangar::controller {
namespace {

using job::JobState;

std::shared_ptr<const SpecEntry> SpecOf(const std::string& user, bool unpinned = false) {
  auto e = std::make_shared<SpecEntry>();
  e->spec.user = user;
  e->unpinned = unpinned;
  return e;
}

JobRecord Job(JobTable& t, const std::string& user, bool unpinned = false) {
  JobRecord j;
  j.id = t.TakeId();
  j.spec = SpecOf(user, unpinned);
  return j;
}

TEST(JobTableTest, AddIndexesAJobAndHandsOutRisingIds) {
  JobTable t;
  EXPECT_EQ(t.next_id(), 1u);
  t.Add(Job(t, "ana"));
  t.Add(Job(t, "bo", /*unpinned=*/true));
  t.Add(Job(t, "ana"));
  EXPECT_EQ(t.next_id(), 4u);
  EXPECT_EQ(t.waiting(), (std::set<sched::JobId>{1, 2, 3}));
  EXPECT_EQ(t.unpinned(), (std::set<sched::JobId>{2}));
  EXPECT_TRUE(t.active().empty());
  ASSERT_NE(t.OfUser("ana"), nullptr);
  EXPECT_EQ(*t.OfUser("ana"), (std::vector<sched::JobId>{1, 3}));
  EXPECT_EQ(t.OfUser("cy"), nullptr);
  EXPECT_EQ(t.Find(9), nullptr);
  EXPECT_EQ(t.at(2).spec->spec.user, "bo");
}

// The door: a move the state machine allows changes the state and the waiting index with it; a
// requeued job waits while preempting, as when pending.
TEST(JobTableTest, MoveKeepsTheWaitingIndexInStep) {
  JobTable t;
  JobRecord& j = t.Add(Job(t, "ana"));
  ASSERT_TRUE(t.Move(j, JobState::kStarting, "placement"));
  EXPECT_FALSE(t.IsWaiting(j.id));
  ASSERT_TRUE(t.Move(j, JobState::kRunning, "every task running"));
  ASSERT_TRUE(t.Move(j, JobState::kPreempting, "requeue"));
  EXPECT_TRUE(t.IsWaiting(j.id)) << "a preempting job waits to be placed again";
  ASSERT_TRUE(t.Move(j, JobState::kPending, "previous attempt stopped"));
  EXPECT_TRUE(t.IsWaiting(j.id));
  ASSERT_TRUE(t.Move(j, JobState::kCancelled, "cancel"));
  EXPECT_FALSE(t.IsWaiting(j.id));
  EXPECT_EQ(j.state, JobState::kCancelled);
}

// A restore adds rows in any order with their stored state, then indexes users once.
TEST(JobTableTest, RestoredRowsAreIndexedByTheirState) {
  JobTable t;
  JobRecord running;
  running.id = 40;
  running.spec = SpecOf("bo");
  running.state = JobState::kRunning;
  running.live_tasks = 2;
  JobRecord waiting;
  waiting.id = 12;
  waiting.spec = SpecOf("bo", /*unpinned=*/true);
  t.Restore(std::move(running));
  t.Restore(std::move(waiting));
  EXPECT_TRUE(t.KeepAbove(40));
  EXPECT_FALSE(t.KeepAbove(12)) << "ids below the next one do not move it";
  EXPECT_EQ(t.next_id(), 41u);
  t.ReindexUsers();
  EXPECT_EQ(*t.OfUser("bo"), (std::vector<sched::JobId>{12, 40}));
  EXPECT_EQ(t.active(), (std::set<sched::JobId>{40}));
  EXPECT_EQ(t.waiting(), (std::set<sched::JobId>{12}));
  EXPECT_EQ(t.unpinned(), (std::set<sched::JobId>{12}));
}

TEST(JobTableTest, ForgetDropsEveryIndexAndCountsUntilTaken) {
  JobTable t;
  for (int i = 0; i < 4; ++i) t.Add(Job(t, i % 2 ? "bo" : "ana", /*unpinned=*/i == 0));
  t.Activate(2);
  t.Forget({1, 2, 4});
  EXPECT_EQ(t.records().size(), 1u);
  EXPECT_EQ(t.waiting(), (std::set<sched::JobId>{3}));
  EXPECT_TRUE(t.unpinned().empty());
  EXPECT_TRUE(t.active().empty());
  EXPECT_EQ(*t.OfUser("ana"), (std::vector<sched::JobId>{3}));
  EXPECT_EQ(t.OfUser("bo"), nullptr) << "a user with no job left has no list";
  EXPECT_EQ(t.TakeForgotten(), 3);
  EXPECT_EQ(t.TakeForgotten(), 0);
}

// The purge pass walks a bounded number of records a call, going on where it stopped and round
// the table, never the same record twice in one call.
TEST(JobTableTest, ScanGoesOnWhereItStoppedAndWraps) {
  JobTable t;
  for (int i = 0; i < 5; ++i) t.Add(Job(t, "ana"));
  std::vector<sched::JobId> seen;
  auto note = [&](const JobRecord& j) {
    seen.push_back(j.id);
    return j.id % 2 == 0;
  };
  EXPECT_EQ(t.ScanFrom(3, note), (std::vector<sched::JobId>{2}));
  EXPECT_EQ(t.ScanFrom(3, note), (std::vector<sched::JobId>{4}));
  EXPECT_EQ(seen, (std::vector<sched::JobId>{1, 2, 3, 4, 5, 1}));
  seen.clear();
  EXPECT_EQ(t.ScanFrom(100, note).size(), 2u);
  EXPECT_EQ(seen.size(), 5u) << "each record at most once a call";
}

TEST(JobTableTest, ViewChangesAreKeptOnlyOnceTracked) {
  JobTable t;
  t.TouchView(1);
  EXPECT_TRUE(t.TakeViewChanges().empty());
  t.TrackViewChanges();
  t.TouchView(1);
  t.TouchView(3);
  EXPECT_EQ(t.TakeViewChanges(), (std::vector<sched::JobId>{1, 3}));
  EXPECT_TRUE(t.TakeViewChanges().empty());
}

// After a restore the store's specs are counted from the records on first use: each user's bytes,
// once per spec however many jobs share it.
TEST(JobTableTest, SpecsAreCountedFromTheRecordsOnFirstUse) {
  JobTable t;
  auto shared = std::make_shared<SpecEntry>();
  shared->spec.user = "ana";
  shared->key = "k1";
  shared->stored = std::make_shared<const std::string>(100, 'x');
  for (int i = 0; i < 3; ++i) {
    JobRecord j;
    j.id = t.TakeId();
    j.spec = shared;
    t.Add(std::move(j));
  }
  SpecBook& book = t.Specs(/*max_bytes_per_user=*/150);
  EXPECT_EQ(book.specs(), 1u);
  EXPECT_EQ(book.UserBytes("ana"), 100);
  EXPECT_FALSE(book.MayStore("ana", "k2", 60).ok()) << "over the user's 150 bytes";
  EXPECT_EQ(&t.Specs(0), &book) << "counted once";
}

}  // namespace
}  // namespace hangar::controller
