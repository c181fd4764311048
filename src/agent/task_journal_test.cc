// TaskJournal: records survive as a snapshot plus appended lines; a journal of an older snapshot
// and a torn last line are ignored; the store identity file.
#include "agent/task_journal.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "agent/data/test_dir.h"

namespace hangar::agent {
namespace {

using data::TempDir;

// The records as the agent rebuilds them: the last line of each task wins.
std::map<std::string, std::string> States(const std::vector<nlohmann::json>& lines) {
  std::map<std::string, std::string> out;
  for (const auto& j : lines) out[j.value("task_id", "")] = j.value("state", "");
  return out;
}

nlohmann::json Rec(const std::string& id, const std::string& state) {
  return {{"task_id", id}, {"state", state}};
}

TEST(TaskJournalTest, AppendedRecordsAreReadBackOverTheSnapshot) {
  TempDir dir;
  {
    TaskJournal j(dir.path());
    EXPECT_TRUE(j.Load().empty());
    j.Compact({Rec("1.0.0", "running"), Rec("2.0.0", "running")});
    j.Append(Rec("1.0.0", "ended"));
    j.Append(Rec("3.0.0", "running"));
    EXPECT_EQ(j.appended(), 2u);
  }
  TaskJournal again(dir.path());
  EXPECT_EQ(States(again.Load()),
            (std::map<std::string, std::string>{
                {"1.0.0", "ended"}, {"2.0.0", "running"}, {"3.0.0", "running"}}));
  // And on from there: a compaction starts an empty journal of the next generation.
  again.Compact({Rec("2.0.0", "ended")});
  again.Append(Rec("4.0.0", "running"));
  TaskJournal third(dir.path());
  EXPECT_EQ(States(third.Load()),
            (std::map<std::string, std::string>{{"2.0.0", "ended"}, {"4.0.0", "running"}}));
}

TEST(TaskJournalTest, AJournalOfAnOlderSnapshotIsIgnoredAndATornLineSkipped) {
  TempDir dir;
  {
    TaskJournal j(dir.path());
    j.Load();
    j.Compact({Rec("1.0.0", "running")});
    j.Append(Rec("1.0.0", "ended"));
  }
  // The agent stopped after writing a newer snapshot but before it started the new journal: the
  // old journal's "running"-era lines must not undo the snapshot.
  {
    std::ofstream snap(dir.path() + "/tasks.json", std::ios::trunc);
    snap << nlohmann::json{{"generation", 7}, {"tasks", {Rec("1.0.0", "gone")}}}.dump() << "\n";
  }
  EXPECT_EQ(States(TaskJournal(dir.path()).Load()),
            (std::map<std::string, std::string>{{"1.0.0", "gone"}}));

  // A crash in the middle of an append leaves half a line: the whole lines before it count.
  TempDir torn;
  {
    TaskJournal j(torn.path());
    j.Load();
    j.Compact({});
    j.Append(Rec("5.0.0", "running"));
  }
  {
    std::ofstream out(torn.path() + "/tasks.journal", std::ios::app);
    out << R"({"task_id":"5.0.0","sta)";
  }
  EXPECT_EQ(States(TaskJournal(torn.path()).Load()),
            (std::map<std::string, std::string>{{"5.0.0", "running"}}));
}

TEST(TaskJournalTest, ReadsTheBareArrayOfEarlierAgents) {
  TempDir dir;
  {
    std::ofstream out(dir.path() + "/tasks.json");
    out << nlohmann::json::array({Rec("9.1.0", "running")}).dump() << "\n";
  }
  EXPECT_EQ(States(TaskJournal(dir.path()).Load()),
            (std::map<std::string, std::string>{{"9.1.0", "running"}}));
}

TEST(TaskJournalTest, TheStoreIdIsKeptAndForgotten) {
  TempDir dir;
  EXPECT_EQ(ReadStoreId(dir.path()), "");
  ASSERT_TRUE(WriteStoreId(dir.path(), "0123abcd"));
  EXPECT_EQ(ReadStoreId(dir.path()), "0123abcd");
  ASSERT_TRUE(WriteStoreId(dir.path(), ""));
  EXPECT_EQ(ReadStoreId(dir.path()), "");
  EXPECT_TRUE(WriteStoreId(dir.path(), "")) << "forgetting twice is fine";
}

}  // namespace
}  // namespace hangar::agent
