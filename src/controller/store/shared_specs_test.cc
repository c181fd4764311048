// Job specs stored once: every store keeps one row per distinct spec however many jobs share it,
// purged jobs and specs go, and stores written before specs were shared are upgraded in place.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

#include "controller/store/backup.h"
#include "controller/store/state_store.h"
#include "controller/store/store_follower.h"
#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

// One query's first column of its first row, from the SQLite file at `path`.
std::string SqliteValue(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string out;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(q, 0);
      out = t ? reinterpret_cast<const char*>(t) : "";
    }
    sqlite3_finalize(q);
  }
  sqlite3_close(db);
  return out;
}

void SqliteExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// 10,000 elements of one array, sharing one spec of `spec_bytes`.
StoreBatch AnArray(size_t spec_bytes) {
  auto text =
      std::make_shared<const std::string>("{\"array\":\"" + std::string(spec_bytes, '7') + "\"}");
  const std::string key = SpecKey(*text);
  StoreBatch b;
  for (uint64_t id = 1; id <= 10'000; ++id) {
    JobRow j;
    j.id = id;
    j.name = "sweep";
    j.queue = "default";
    j.user = "alice";
    j.state = "pending";
    j.spec_key = key;
    j.spec = text;
    b.jobs.push_back(std::move(j));
  }
  return b;
}

class SharedSpecsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::replace(name.begin(), name.end(), '/', '_');
      dir_ = ::testing::TempDir() + "/specs-" + std::to_string(::getpid()) + "-" + name;
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
  std::unique_ptr<StateStore> Open() { return std::move(OpenStore(url_)).value(); }
  // Rows of the specs table and the bytes of their texts ("" for the memory store).
  std::pair<std::string, std::string> SpecRows() {
    const std::string sql = "SELECT count(*) || ' ' || coalesce(sum(length(text)), 0) FROM specs";
    std::string v;
    if (GetParam() == "sqlite") v = SqliteValue(dir_ + "/state.db", sql);
    if (GetParam() == "postgres") v = testing::Sql(url_, sql);
    if (v.empty()) return {};
    return {v.substr(0, v.find(' ')), v.substr(v.find(' ') + 1)};
  }
  std::string dir_, url_;
};

// A 500 KB spec with array: "0-199" wrote 200 MB: one copy per element.
TEST_P(SharedSpecsTest, AnArrayOf10000ElementsStoresItsSpecOnce) {
  auto store = Open();
  ASSERT_TRUE(store->Commit(AnArray(60'000)).ok());
  // Each element placed, as a cycle would: the spec is not written again.
  StoreBatch placed = AnArray(60'000);
  for (auto& j : placed.jobs) j.state = "running";
  ASSERT_TRUE(store->Commit(placed).ok());
  if (GetParam() != "memory") {
    auto [rows, bytes] = SpecRows();
    EXPECT_EQ(rows, "1");
    EXPECT_EQ(bytes, std::to_string(60'012));
  }
  auto c = store->Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->jobs.size(), 10'000u);
  std::set<const std::string*> texts;
  for (const auto& j : c->jobs) texts.insert(j.spec.get());
  EXPECT_EQ(texts.size(), 1u) << "loaded once, shared by every row";
  EXPECT_EQ(c->jobs.back().state, "running");
  EXPECT_EQ(c->jobs.back().spec_text().size(), 60'012u);
}

TEST_P(SharedSpecsTest, PurgedJobsAndTheirSpecGo) {
  auto store = Open();
  StoreBatch b = AnArray(10);
  JobRow other = b.jobs.front();
  other.id = 20'000;
  other.SetSpec("{\"other\":1}");
  b.jobs.push_back(other);
  ASSERT_TRUE(store->Commit(b).ok());
  StoreBatch purge;
  for (uint64_t id = 1; id <= 10'000; ++id) purge.erased_jobs.push_back(id);
  purge.erased_specs = {b.jobs.front().spec_key};
  ASSERT_TRUE(store->Commit(purge).ok());
  if (GetParam() != "memory") {
    EXPECT_EQ(SpecRows().first, "1");
  }
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].spec_text(), "{\"other\":1}");
  // A spec erased and used again in one batch is written again.
  StoreBatch again = AnArray(10);
  again.jobs.resize(1);
  again.erased_specs = {again.jobs[0].spec_key};
  ASSERT_TRUE(store->Commit(again).ok());
  c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 2u);
  EXPECT_EQ(c->jobs[0].spec_text(), again.jobs[0].spec_text());
}

// A backup holds each spec once too, and restores into any store.
TEST_P(SharedSpecsTest, ABackupHoldsEachSpecOnce) {
  auto store = Open();
  ASSERT_TRUE(store->Commit(AnArray(5'000)).ok());
  std::stringstream out;
  auto n = WriteBackup(*store, out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->specs, 1u);
  EXPECT_LT(out.str().size(), 10'000'000u) << "not 10,000 copies of 5 KB (50 MB)";
  auto into = NewMemoryStore();
  auto back = RestoreBackup(out, "b.jsonl", *into, false);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto c = into->Load();
  ASSERT_EQ(c->jobs.size(), 10'000u);
  EXPECT_EQ(c->jobs[0].spec, c->jobs[9'999].spec);
}

INSTANTIATE_TEST_SUITE_P(AllStores, SharedSpecsTest,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

// A standby's copy of the rows loses purged jobs too, and its rows share their spec's text.
TEST(SharedSpecsFollowerTest, AStandbyFollowsPurgesAndSharesSpecs) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  StoreFollower f(std::move(OpenStore(url)).value());
  ASSERT_TRUE(f.CatchUp().ok());
  ASSERT_TRUE(leader->Commit(AnArray(100)).ok());
  std::vector<const JobRow*> changed;
  ASSERT_TRUE(f.CatchUp(&changed).ok());
  ASSERT_EQ(changed.size(), 10'000u);
  EXPECT_EQ(changed.front()->spec, changed.back()->spec) << "one text for every row of a catch-up";
  EXPECT_EQ(changed.front()->spec_text().size(), 112u);
  StoreBatch purge;
  for (uint64_t id = 1; id <= 9'990; ++id) purge.erased_jobs.push_back(id);
  ASSERT_TRUE(leader->Commit(purge).ok());
  ASSERT_TRUE(f.CatchUp().ok());
  EXPECT_EQ(f.jobs(), 10u);
  EXPECT_EQ(f.full_loads(), 1) << "followed, not loaded again";
}

// A standby read a spec, the leader then purged its last job and the spec; once the standby leads
// and a job uses that spec again, the spec is written again.
TEST(SharedSpecsFollowerTest, ASpecReadThenPurgedByAnotherStoreIsWrittenAgain) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  auto standby = std::move(OpenStore(url)).value();
  StoreBatch one = AnArray(10);
  one.jobs.resize(1);
  ASSERT_TRUE(leader->Commit(one).ok());
  auto seen = standby->Load();
  ASSERT_TRUE(seen.ok());
  ASSERT_EQ(seen->jobs.size(), 1u);
  StoreBatch purge;
  purge.erased_jobs = {1};
  purge.erased_specs = {one.jobs[0].spec_key};
  ASSERT_TRUE(leader->Commit(purge).ok());
  // As a warm standby does before it takes over: it follows the leader's changes (the purge, and
  // the store's high-water record with it).
  ASSERT_TRUE(standby->ChangesSince(seen->rev).ok());
  StoreBatch again = AnArray(10);
  again.jobs.resize(1);
  again.jobs[0].id = 2;
  ASSERT_TRUE(standby->Commit(again).ok());
  auto c = leader->Load();
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].spec_text(), one.jobs[0].spec_text())
      << "the spec is there for the job that uses it";
}

// A backup of format 1 (each job row with its spec's text) still restores.
TEST(SharedSpecsBackupTest, AFormatOneBackupRestores) {
  std::stringstream in(
      "{\"hangar_backup\":1}\n"
      "{\"job\":{\"id\":1,\"name\":\"a\",\"queue\":\"q\",\"user\":\"u\",\"state\":\"pending\","
      "\"spec\":\"{\\\"x\\\":1}\","
      "\"submitted\":1,\"started\":0,\"ended\":0,\"attempt\":0,\"restarts\":0,\"reason\":\"\","
      "\"message\":\"\","
      "\"placement\":\"\",\"extra\":\"\"}}\n"
      "{\"end\":{\"jobs\":1,\"nodes\":0,\"values\":0,\"events\":0,\"audit\":0}}\n");
  auto store = NewMemoryStore();
  auto n = RestoreBackup(in, "old.jsonl", *store, false);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  auto c = store->Load();
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].spec_text(), "{\"x\":1}");
  EXPECT_EQ(c->jobs[0].spec_key, SpecKey("{\"x\":1}"));
}

// A SQLite store written before specs were shared (one copy in every job row) opens, keeps its
// jobs with their specs, and holds each distinct spec once afterwards.
TEST(SharedSpecsMigrationTest, AnOlderSqliteStoreIsUpgradedKeepingItsJobs) {
  const std::string dir = ::testing::TempDir() + "/specs-migrate-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/state.db";
  // The layout as it was released: jobs.spec holds the text.
  SqliteExec(
      path,
      "PRAGMA journal_mode=WAL;"
      "CREATE TABLE jobs (id INTEGER PRIMARY KEY, name TEXT NOT NULL, queue TEXT NOT NULL, user "
      "TEXT NOT NULL,"
      " state TEXT NOT NULL, spec TEXT NOT NULL, submitted_ms INTEGER, started_ms INTEGER, "
      "ended_ms INTEGER,"
      " attempt INTEGER, restarts INTEGER, reason TEXT, message TEXT, placement TEXT, extra TEXT);"
      "CREATE INDEX jobs_state ON jobs(state);"
      "CREATE TABLE kv (tbl TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY "
      "(tbl, key));"
      "INSERT INTO jobs VALUES (1,'a','q','alice','succeeded','{\"s\":1}',1,2,3,1,0,'','','','');"
      "INSERT INTO jobs VALUES "
      "(2,'b','q','alice','pending','{\"s\":2}',4,0,0,0,0,'','','','{\"array_id\":2}');"
      "INSERT INTO jobs VALUES "
      "(3,'b','q','alice','pending','{\"s\":2}',4,0,0,0,0,'','','','{\"array_id\":2}');"
      "INSERT INTO kv VALUES ('meta','next_job_id','4');");
  ASSERT_EQ(SqliteValue(path, "PRAGMA user_version"), "0");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto c = (*store)->Load();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_EQ(c->jobs.size(), 3u);
    EXPECT_EQ(c->jobs[0].spec_text(), "{\"s\":1}");
    EXPECT_EQ(c->jobs[0].state, "succeeded");
    EXPECT_EQ(c->jobs[0].ended, 3);
    EXPECT_EQ(c->jobs[1].spec_text(), "{\"s\":2}");
    EXPECT_EQ(c->jobs[1].spec, c->jobs[2].spec);
    EXPECT_EQ(c->jobs[2].extra_json, "{\"array_id\":2}");
    ASSERT_EQ(c->values.size(), 1u);
  }
  EXPECT_EQ(SqliteValue(path, "PRAGMA user_version"), "2");
  EXPECT_EQ(SqliteValue(path, "SELECT count(*) FROM specs"), "2");
  EXPECT_EQ(SqliteValue(path, "SELECT count(*) FROM pragma_table_info('jobs') WHERE name='spec'"),
            "0");
  // Opened again: nothing to do, and it takes new jobs.
  auto store = std::move(OpenSqliteStore(path)).value();
  StoreBatch b;
  JobRow j;
  j.id = 4;
  j.name = "c";
  j.queue = "q";
  j.user = "alice";
  j.state = "pending";
  j.SetSpec("{\"s\":2}");
  b.jobs = {j};
  ASSERT_TRUE(store->Commit(b).ok());
  EXPECT_EQ(store->Load()->jobs.size(), 4u);
  EXPECT_EQ(SqliteValue(path, "SELECT count(*) FROM specs"), "2");
  std::filesystem::remove_all(dir);
}

TEST(SharedSpecsMigrationTest, ASqliteStoreNewerThanThisHangarIsRefused) {
  const std::string dir = ::testing::TempDir() + "/specs-newer-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  { ASSERT_TRUE(OpenSqliteStore(dir + "/state.db").ok()); }
  SqliteExec(dir + "/state.db", "PRAGMA user_version = 99");
  auto s = OpenSqliteStore(dir + "/state.db");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(
      s.status().message().find("has schema version 99, newer than this hangar knows (up to 2)"),
      std::string::npos)
      << s.status().message();
  std::filesystem::remove_all(dir);
}

// The same for PostgreSQL (migration 5), from a database at version 4.
TEST(SharedSpecsMigrationTest, AnOlderPostgresStoreIsUpgradedKeepingItsJobs) {
  const std::string url = testing::FreshDatabaseUrl();
  { ASSERT_TRUE(OpenStore(url).ok()); }
  testing::Sql(
      url,
      "DROP TABLE specs; ALTER TABLE jobs DROP COLUMN spec_key; ALTER TABLE jobs ADD COLUMN spec "
      "TEXT NOT NULL;"
      "DROP TABLE history; DELETE FROM schema_version WHERE version >= 5;"
      "INSERT INTO jobs (id,name,queue,user_name,state,spec) VALUES "
      "(1,'a','q','alice','succeeded','{\"s\":1}'),"
      "(2,'b','q','alice','pending','{\"s\":2}'), (3,'b','q','alice','pending','{\"s\":2}')");
  auto store = std::move(OpenStore(url)).value();
  EXPECT_EQ(testing::Sql(url, "SELECT max(version) FROM schema_version"), "6");
  EXPECT_EQ(testing::Sql(url, "SELECT count(*) FROM specs"), "2");
  auto c = store->Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->jobs.size(), 3u);
  EXPECT_EQ(c->jobs[0].spec_text(), "{\"s\":1}");
  EXPECT_EQ(c->jobs[0].spec_key, SpecKey("{\"s\":1}")) << "the server's key is the controller's";
  EXPECT_EQ(c->jobs[1].spec, c->jobs[2].spec);
}

}  // namespace
}  // namespace hangar::controller
