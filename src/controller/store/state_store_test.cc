#include "controller/store/state_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

// The same contract for every implementation: memory, SQLite and PostgreSQL (a server of the
// test binary's own, one database per test).
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<StateStore> Open() {
    auto s = OpenStore(url_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : NewMemoryStore();
  }
  void SetUp() override {
    if (GetParam() == "sqlite") {
      std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::replace(name.begin(), name.end(), '/', '_');
      dir_ = ::testing::TempDir() + "/store-" + std::to_string(::getpid()) + "-" + name;
      std::filesystem::remove_all(dir_);
      url_ = "sqlite://" + dir_ + "/state.db";
    } else if (GetParam() == "postgres") {
      url_ = testing::FreshDatabaseUrl();
    } else {
      url_ = "memory://";
    }
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string url_, dir_;
};

JobRow Job(uint64_t id, const std::string& state) {
  JobRow j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = "default";
  j.user = "alice";
  j.state = state;
  j.SetSpec(R"({"name":"x"})");
  j.submitted = 1000 + id;
  return j;
}

TEST_P(StoreTest, CommitThenLoad) {
  auto store = Open();
  StoreBatch b;
  b.jobs = {Job(1, "pending"), Job(2, "running")};
  b.jobs[1].placement_json = R"({"tasks":[]})";
  b.nodes = {{"gpu-1", R"({"drained":false})"}};
  b.values = {{"meta", "next_job_id", "3", false}, {"queue", "default", "{}", false}};
  b.events = {{0, 5, "job", "job/1", "submitted"}, {0, 6, "job", "job/2", "started"}};
  ASSERT_TRUE(store->Commit(b).ok());
  // An update of job 1 and the removal of a value.
  StoreBatch u;
  u.jobs = {Job(1, "cancelled")};
  u.values = {{"queue", "default", "", true}};
  ASSERT_TRUE(store->Commit(u).ok());
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 2u);
  EXPECT_EQ(c->jobs[0].state, "cancelled");
  EXPECT_EQ(c->jobs[1].placement_json, R"({"tasks":[]})");
  EXPECT_EQ(c->jobs[1].submitted, 1002);
  ASSERT_EQ(c->nodes.size(), 1u);
  ASSERT_EQ(c->values.size(), 1u);
  EXPECT_EQ(c->values[0].value, "3");
  auto ev = store->Events("job/1", 10);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].message, "submitted");
  EXPECT_EQ(store->Events("", 10)->size(), 2u);
  EXPECT_EQ(store->Events("", 1)->at(0).message, "started");  // newest first
}

TEST_P(StoreTest, AuditLogNewestFirstByUser) {
  auto store = Open();
  StoreBatch b;
  b.audit.push_back({0, 10, "alice", "user", "POST", "/v1/jobs", "127.0.0.1", 201, ""});
  b.audit.push_back({0, 11, "bob", "user", "DELETE", "/v1/jobs/1", "127.0.0.1", 403, "not yours"});
  b.audit.push_back({0, 12, "alice", "user", "POST", "/v1/jobs/2/cancel", "::1", 200, ""});
  ASSERT_TRUE(store->Commit(b).ok());
  auto all = store->Audit("", 10);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(all->at(0).path, "/v1/jobs/2/cancel");
  EXPECT_EQ(all->at(1).status, 403);
  EXPECT_EQ(all->at(1).message, "not yours");
  EXPECT_GT(all->at(0).id, all->at(1).id);
  auto alice = store->Audit("alice", 10);
  ASSERT_EQ(alice->size(), 2u);
  EXPECT_EQ(alice->at(1).remote, "127.0.0.1");
  EXPECT_EQ(store->Audit("", 1)->size(), 1u);
}

TEST_P(StoreTest, ARowNamedTwiceInOneBatchKeepsItsLastWrite) {
  auto store = Open();
  StoreBatch b;
  b.jobs = {Job(1, "pending"), Job(2, "pending"), Job(1, "running")};
  b.nodes = {{"n1", "a"}, {"n1", "b"}};
  b.values = {{"meta", "k", "1", false},
              {"meta", "k", "", true},
              {"meta", "j", "1", false},
              {"meta", "j", "2", false}};
  ASSERT_TRUE(store->Commit(b).ok());
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 2u);
  EXPECT_EQ(c->jobs[0].state, "running");
  ASSERT_EQ(c->nodes.size(), 1u);
  EXPECT_EQ(c->nodes[0].state_json, "b");
  ASSERT_EQ(c->values.size(), 1u);
  EXPECT_EQ(c->values[0].key, "j");
  EXPECT_EQ(c->values[0].value, "2");
}

TEST_P(StoreTest, EventsKeepTheirOrderAndFilterByPrefix) {
  auto store = Open();
  for (int round = 0; round < 3; ++round) {
    StoreBatch b;
    for (int i = 0; i < 50; ++i) {
      b.events.push_back({0, round * 100 + i, "job", "job/" + std::to_string(i % 3),
                          std::to_string(round * 50 + i)});
    }
    ASSERT_TRUE(store->Commit(b).ok());
  }
  auto all = store->Events("", 1000);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 150u);
  for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ(all->at(i).message, std::to_string(149 - i));
  auto two = store->Events("job/2", 1000);
  ASSERT_EQ(two->size(), 48u);  // i % 3 == 2: 16 of each round's 50
  EXPECT_EQ(two->at(0).subject, "job/2");
  EXPECT_EQ(store->Events("job/", 7)->size(), 7u);
  EXPECT_TRUE(store->Events("node/", 10)->empty());
}

TEST_P(StoreTest, EraseAllEmptiesEveryTableInTheSameCommit) {
  auto store = Open();
  StoreBatch b;
  b.jobs = {Job(1, "pending")};
  b.nodes = {{"n1", "{}"}};
  b.values = {{"meta", "k", "v", false}};
  b.events = {{0, 1, "job", "job/1", "submitted"}};
  b.audit = {{0, 1, "alice", "user", "POST", "/v1/jobs", "127.0.0.1", 201, ""}};
  ASSERT_TRUE(store->Commit(b).ok());
  StoreBatch replace;
  replace.erase_all = true;
  replace.jobs = {Job(9, "pending")};
  ASSERT_TRUE(store->Commit(replace).ok());
  auto c = store->Load();
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].id, 9u);
  EXPECT_TRUE(c->nodes.empty());
  EXPECT_TRUE(c->values.empty());
  EXPECT_TRUE(store->Events("", 10)->empty());
  EXPECT_TRUE(store->Audit("", 10)->empty());
}

// The memory store keeps nothing across opens, by design: this holds for the durable two.
class DurableStoreTest : public StoreTest {};

TEST_P(DurableStoreTest, ACommitSurvivesReopen) {
  {
    auto store = Open();
    StoreBatch b;
    b.jobs = {Job(7, "running")};
    b.jobs[0].SetSpec("{\"name\":\"caf\u00e9 \\\" 'quoted'\"}");
    b.jobs[0].started = 1'700'000'000'123;
    b.jobs[0].attempt = 3;
    b.events = {{0, 5, "job", "job/7", "started"}};
    ASSERT_TRUE(store->Commit(b).ok());
  }
  auto store = Open();
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].spec_text(), "{\"name\":\"caf\u00e9 \\\" 'quoted'\"}");
  EXPECT_EQ(c->jobs[0].started, 1'700'000'000'123);
  EXPECT_EQ(c->jobs[0].attempt, 3u);
  EXPECT_EQ(store->Events("job/7", 10)->size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreTest, ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Durable, DurableStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

// Issue 15 and 16: the SQLite store belongs to one controller, is readable by its owner only, and
// a store file deleted under a running controller stops its commits instead of vanishing quietly.
class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/sqlite-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    path_ = dir_ + "/state.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static StoreBatch OneJob(uint64_t id) {
    StoreBatch b;
    b.jobs = {Job(id, "pending")};
    return b;
  }
  std::string dir_, path_;
};

TEST_F(SqliteStoreTest, SurvivesReopen) {
  {
    auto store = OpenSqliteStore(path_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Commit(OneJob(7)).ok());
  }
  auto store = std::move(OpenSqliteStore(path_)).value();
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].id, 7u);
  EXPECT_EQ(c->jobs[0].user, "alice");
}

// The WAL is copied into the database by the store's own thread, while the store stays open and
// commits go on (no commit waits for a checkpoint), and what was committed reads back.
TEST_F(SqliteStoreTest, TheWalIsCheckpointedWhileTheStoreStaysOpenAndCommitsGoOn) {
  auto store = std::move(OpenSqliteStore(path_)).value();
  const auto size = [](const std::string& f) {
    std::error_code ec;
    const auto n = std::filesystem::file_size(f, ec);
    return ec ? uintmax_t{0} : n;
  };
  const uintmax_t empty = size(path_);
  // ~2,000 WAL pages: past the 1,000 that wake the checkpointer.
  for (uint64_t id = 1; id <= 2000; ++id) {
    StoreBatch b;
    b.jobs = {Job(id, "pending")};
    b.jobs[0].SetSpec(std::string(3000, 'x') + std::to_string(id));  // distinct: each stored
    ASSERT_TRUE(store->Commit(b).ok());
  }
  bool copied = false;
  for (int i = 0; i < 100 && !copied; ++i) {
    copied = size(path_) > empty + 4'000'000;  // the rows are in the database file itself
    if (!copied) ::usleep(50'000);
  }
  EXPECT_TRUE(copied) << "database " << size(path_) << " bytes, WAL " << size(path_ + "-wal");
  ASSERT_TRUE(store->Commit(OneJob(5000)).ok());
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->jobs.size(), 2001u);
  store.reset();
  auto again = std::move(OpenSqliteStore(path_)).value();
  EXPECT_EQ(again->Load()->jobs.size(), 2001u);
}

TEST_F(SqliteStoreTest, ASecondOwnerIsRefusedUntilTheFirstCloses) {
  auto first = OpenSqliteStore(path_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = OpenSqliteStore(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            "the store " + path_ + " is in use by another controller (pid " +
                std::to_string(::getpid()) +
                "); stop it first, or give this controller a store of its own (--store)");
  first->reset();
  EXPECT_TRUE(OpenSqliteStore(path_).ok()) << "the lock goes with its owner";
}

TEST_F(SqliteStoreTest, FilesAreTheOwnersOnly) {
  auto store = OpenSqliteStore(path_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Commit(OneJob(1)).ok());
  for (const std::string& f : {path_, path_ + "-wal"}) {
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
}

TEST_F(SqliteStoreTest, ADeletedStoreFileStopsCommits) {
  auto store = OpenSqliteStore(path_);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Commit(OneJob(1)).ok());
  std::filesystem::remove(path_);
  std::filesystem::remove(path_ + "-wal");
  Status s = (*store)->Commit(OneJob(2));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("was deleted or replaced while the controller ran"), std::string::npos)
      << s.message();
}

TEST(StoreUrlTest, BadUrlsAreExplained) {
  auto s = OpenStore("mysql://x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(
                "use sqlite:///path/to/state.db, postgres://USER@HOST:PORT/DATABASE or memory://"),
            std::string::npos);
  auto unwritable = OpenStore("sqlite:///proc/nope/state.db");
  EXPECT_FALSE(unwritable.ok());
}

}  // namespace
}  // namespace hangar::controller
