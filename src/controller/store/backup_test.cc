#include "controller/store/backup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

class BackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/backup-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A store with a row in every table, written over three commits.
  static void Fill(StateStore& s) {
    for (uint64_t id = 1; id <= 3; ++id) {
      StoreBatch b;
      JobRow j;
      j.id = id;
      j.name = "train-" + std::to_string(id);
      j.queue = "research";
      j.user = "alice";
      j.state = id == 1 ? "running" : "pending";
      j.SetSpec("{\"name\":\"train\",\"env\":{\"A\":\"caf\u00e9\"}}");
      j.submitted = 1000 * id;
      j.started = id == 1 ? 5000 : 0;
      j.attempt = 1;
      j.placement_json = id == 1 ? "{\"tasks\":[{\"node\":\"gpu-1\"}]}" : "";
      b.jobs = {j};
      b.nodes = {{"gpu-" + std::to_string(id), "{\"drained\":false}"}};
      b.values = {{"meta", "next_job_id", std::to_string(id + 1), false},
                  {"token", "t" + std::to_string(id), "{}", false}};
      b.events = {{0, static_cast<Time>(id), "job", "job/" + std::to_string(id), "submitted"}};
      b.audit = {
          {0, static_cast<Time>(id), "alice", "user", "POST", "/v1/jobs", "127.0.0.1", 201, ""}};
      // A sample a minute, and an hourly roll-up (the dashboard's charts).
      b.history = {{static_cast<Time>(id) * 60'000, 60'000, 16, 8, 6.5, 1.5, 2, 1}};
      if (id == 1) b.history.push_back({0, kHistoryHour, 16, 4, 3, 1, 0.5, 0.25});
      ASSERT_TRUE(s.Commit(b).ok());
    }
  }

  static std::string Backup(StateStore& s) {
    std::stringstream out;
    auto n = WriteBackup(s, out);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return out.str();
  }

  // The backup without its header line (which names the store it came from).
  static std::string Rows(const std::string& backup) {
    return backup.substr(backup.find('\n') + 1);
  }

  std::unique_ptr<StateStore> Sqlite(const std::string& name) {
    return std::move(OpenStore("sqlite://" + dir_ + "/" + name + ".db")).value();
  }
  std::string dir_;
};

TEST_F(BackupTest, SqliteToPostgresAndBackKeepsEveryRow) {
  auto sqlite = Sqlite("a");
  Fill(*sqlite);
  const std::string first = Backup(*sqlite);
  auto pg = std::move(OpenStore(testing::FreshDatabaseUrl())).value();
  std::stringstream in(first);
  auto n = RestoreBackup(in, "first.jsonl", *pg, /*replace=*/false);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->ToString(), "3 jobs, 3 nodes, 4 values, 3 events, 3 audit records, 4 history rows");
  const std::string second = Backup(*pg);
  EXPECT_EQ(Rows(first), Rows(second));
  auto back = Sqlite("b");
  std::stringstream in2(second);
  ASSERT_TRUE(RestoreBackup(in2, "second.jsonl", *back, false).ok());
  EXPECT_EQ(Rows(Backup(*back)), Rows(first));
  EXPECT_EQ(back->Events("job/2", 10)->at(0).message, "submitted");
  EXPECT_EQ(back->Audit("alice", 10)->size(), 3u);
  ASSERT_EQ(back->History(/*hourly=*/true, 0)->size(), 1u) << "the dashboard's charts came back";
  EXPECT_EQ(back->History(true, 0)->at(0).allocated, 4);
  EXPECT_EQ(back->History(false, 0)->size(), 3u);
}

TEST_F(BackupTest, ANonEmptyStoreIsRefusedUnlessReplaced) {
  auto source = Sqlite("a");
  Fill(*source);
  const std::string backup = Backup(*source);
  auto target = Sqlite("b");
  StoreBatch other;
  other.jobs.push_back(JobRow{});
  other.jobs[0].id = 99;
  other.jobs[0].SetSpec("{}");
  other.events = {{0, 1, "job", "job/99", "mine"}};
  ASSERT_TRUE(target->Commit(other).ok());
  std::stringstream in(backup);
  auto refused = RestoreBackup(in, "b.jsonl", *target, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "the store sqlite://" + dir_ +
                "/b.db is not empty; restore into an empty store, or add --force to "
                "erase everything in it and replace it with the backup");
  EXPECT_EQ(target->Load()->jobs.size(), 1u) << "a refused restore changes nothing";
  std::stringstream again(backup);
  ASSERT_TRUE(RestoreBackup(again, "b.jsonl", *target, true).ok());
  EXPECT_EQ(Rows(Backup(*target)), Rows(backup)) << "job 99 and its event are gone";
}

TEST_F(BackupTest, ADamagedBackupChangesNothing) {
  auto source = Sqlite("a");
  Fill(*source);
  const std::string backup = Backup(*source);
  auto target = Sqlite("b");
  std::stringstream truncated(backup.substr(0, backup.rfind("{\"end\"")));
  auto s = RestoreBackup(truncated, "cut.jsonl", *target, false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "cut.jsonl ends before its end line: the backup is truncated; take it again");
  std::string broken = backup;
  broken.insert(backup.find('\n') + 1, "{\"job\":{\"id\":\"seven\"}}\n");
  std::stringstream bad(broken);
  s = RestoreBackup(bad, "bad.jsonl", *target, false);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().rfind("bad.jsonl:2: bad row: ", 0), 0u) << s.status().message();
  std::stringstream none("{\"jobs\":[]}\n");
  s = RestoreBackup(none, "other.json", *target, false);
  EXPECT_EQ(s.status().message(),
            "other.json:1: not a hangar backup (its first line has no \"hangar_backup\")");
  EXPECT_TRUE(StoreIsEmpty(*target).value());
}

}  // namespace
}  // namespace hangar::controller
