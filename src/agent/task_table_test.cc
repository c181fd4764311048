// TaskTable: records kept in the journal and read back by the next agent, old ended records
// forgotten, exits that came before their launch kept until taken, drains counted by job.
#include "agent/task_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

using data::TempDir;

TaskRecord Running(const std::string& id, uint64_t job) {
  TaskRecord r;
  r.task_id = id;
  r.job_id = job;
  r.pid = 4242;
  r.gpus = {0, 3};
  r.uid = 61001;
  return r;
}

// A table opened on `dir` with what an earlier table left there, as Init opens it.
void OpenOn(TaskTable& t, const std::string& dir) {
  auto journal = std::make_unique<TaskJournal>(dir);
  auto loaded = LoadTaskRecords(*journal);
  MutexLock l(t.mu());
  t.Open(std::move(journal), std::move(loaded));
}

// What a table left in `dir`, as the next agent reads it.
std::map<std::string, TaskRecord> OnDisk(const std::string& dir) {
  TaskJournal journal(dir);
  return LoadTaskRecords(journal);
}

TEST(TaskTableTest, RecordsAreReadBackFromTheJournalByTheNextTable) {
  TempDir dir;
  ManualClock clock(1000);
  {
    TaskTable t(&clock);
    OpenOn(t, dir.path());
    MutexLock l(t.mu());
    t.Put(Running("7.0.0", 7));
    TaskRecord b = Running("7.0.1", 7);
    b.container = "hangar-n1-7.0.1";
    b.mig = {{0, 0, 4}};
    t.Put(b);
    TaskRecord* a = t.Find("7.0.0");
    ASSERT_NE(a, nullptr);
    a->ended = true;
    a->exit_code = 3;
    a->ended_at = clock.Now();
    t.Save("7.0.0");
    EXPECT_EQ(t.Find("8.0.0"), nullptr);
  }
  const auto again = OnDisk(dir.path());
  ASSERT_EQ(again.size(), 2u);
  const TaskRecord& a = again.at("7.0.0");
  EXPECT_TRUE(a.ended);
  EXPECT_EQ(a.exit_code, 3);
  EXPECT_EQ(a.job_id, 7u);
  EXPECT_EQ(a.pid, 4242);
  EXPECT_EQ(a.uid, 61001);
  EXPECT_EQ(a.gpus, (std::vector<uint32_t>{0, 3}));
  const TaskRecord& b = again.at("7.0.1");
  EXPECT_FALSE(b.ended);
  EXPECT_EQ(b.container, "hangar-n1-7.0.1");
  ASSERT_EQ(b.mig.size(), 1u);
  EXPECT_EQ(b.mig[0][2], 4u);
}

TEST(TaskTableTest, ASnapshotForgetsTasksThatEndedOverAnHourAgo) {
  TempDir dir;
  ManualClock clock(10 * kHour);
  TaskTable t(&clock);
  OpenOn(t, dir.path());
  {
    MutexLock l(t.mu());
    TaskRecord old = Running("1.0.0", 1);
    old.ended = true;
    old.ended_at = clock.Now() - kHour - 1;
    TaskRecord recent = Running("2.0.0", 2);
    recent.ended = true;
    recent.ended_at = clock.Now() - kHour + 1;
    t.Put(old);
    t.Put(recent);
    t.Put(Running("3.0.0", 3));
    t.SaveAll();
    EXPECT_EQ(t.Find("1.0.0"), nullptr);
    EXPECT_NE(t.Find("2.0.0"), nullptr);
    EXPECT_EQ(t.records().size(), 2u);
  }
  const auto again = OnDisk(dir.path());
  EXPECT_EQ(again.count("1.0.0"), 0u);
  EXPECT_EQ(again.count("2.0.0"), 1u);
  EXPECT_EQ(again.count("3.0.0"), 1u);
}

TEST(TaskTableTest, TheJournalIsFoldedIntoASnapshotOnceItOutgrowsTheRecords) {
  TempDir dir;
  ManualClock clock(1000);
  TaskTable t(&clock);
  OpenOn(t, dir.path());
  {
    MutexLock l(t.mu());
    t.Put(Running("1.0.0", 1));
    for (int i = 0; i < 1500; ++i) {
      t.Find("1.0.0")->exit_code = i;
      t.Save("1.0.0");
    }
  }
  std::ifstream in(dir.path() + "/tasks.journal");
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_LE(lines, 1025u) << "folded once it passed 1024 lines";
  EXPECT_EQ(OnDisk(dir.path()).at("1.0.0").exit_code, 1499);
}

TEST(TaskTableTest, AnEarlyExitIsKeptUntilItsLaunchTakesIt) {
  ManualClock clock(1000);
  TaskTable t(&clock);
  MutexLock l(t.mu());
  EXPECT_FALSE(t.TakeEarlyExit("5.0.0"));
  t.KeepEarlyExit({"5.0.0", 1, 0, false});
  EXPECT_FALSE(t.TakeEarlyExit("5.0.1")) << "another task's";
  t.Put(Running("5.0.0", 5));
  auto e = t.TakeEarlyExit("5.0.0");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->exit_code, 1);
  EXPECT_FALSE(t.TakeEarlyExit("5.0.0")) << "taken once";
}

TEST(TaskTableTest, DrainsAreCountedByJobUntilTheLastIsOver) {
  ManualClock clock(1000);
  TaskTable t(&clock);
  MutexLock l(t.mu());
  EXPECT_FALSE(t.Draining(9));
  t.AddDrain(9);
  t.AddDrain(9);
  t.AddDrain(10);
  EXPECT_TRUE(t.Draining(9));
  EXPECT_FALSE(t.EndDrain(9)) << "one of job 9's drains is still asked for";
  EXPECT_TRUE(t.Draining(9));
  EXPECT_TRUE(t.EndDrain(9));
  EXPECT_FALSE(t.Draining(9));
  EXPECT_TRUE(t.Draining(10));
  EXPECT_TRUE(t.EndDrain(11)) << "a job without drains has none left";
}

TEST(TaskTableTest, ClearForgetsRecordsAndEarlyExitsButNotDrains) {
  TempDir dir;
  ManualClock clock(1000);
  TaskTable t(&clock);
  OpenOn(t, dir.path());
  {
    MutexLock l(t.mu());
    t.Put(Running("1.0.0", 1));
    t.KeepEarlyExit({"2.0.0", 0, 0, false});
    t.AddDrain(1);
    t.Clear();
    EXPECT_TRUE(t.records().empty());
    EXPECT_FALSE(t.TakeEarlyExit("2.0.0"));
    EXPECT_TRUE(t.Draining(1));
  }
  EXPECT_TRUE(OnDisk(dir.path()).empty());
}

TEST(TaskTableTest, WithoutAJournalRecordsStayInMemory) {
  ManualClock clock(1000);
  TaskTable t(&clock);
  MutexLock l(t.mu());
  t.Put(Running("1.0.0", 1));
  t.SaveAll();
  EXPECT_NE(t.Find("1.0.0"), nullptr);
}

}  // namespace
}  // namespace hangar::agent
