// What only the PostgreSQL store has: a versioned schema, a server that may be away, several
// stores on one database.
#include <gtest/gtest.h>

#include "common/net.h"
#include "controller/store/postgres_schema.h"
#include "controller/store/state_store.h"
#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

using testing::Sql;

JobRow Job(uint64_t id) {
  JobRow j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = "default";
  j.user = "alice";
  j.state = "pending";
  j.SetSpec("{}");
  return j;
}

TEST(PostgresStoreTest, MigratesOnceAndRecordsTheVersion) {
  const std::string url = testing::FreshDatabaseUrl();
  ASSERT_TRUE(OpenStore(url).ok());
  ASSERT_TRUE(OpenStore(url).ok());
  EXPECT_EQ(Sql(url, "SELECT count(*) FROM schema_version"),
            std::to_string(pg::LatestSchemaVersion()));
  EXPECT_EQ(Sql(url, "SELECT max(version) FROM schema_version"),
            std::to_string(pg::LatestSchemaVersion()));
}

TEST(PostgresStoreTest, AnOlderSchemaIsMigratedKeepingItsRows) {
  const std::string url = testing::FreshDatabaseUrl();
  {
    auto store = std::move(OpenStore(url)).value();
    StoreBatch b;
    b.jobs = {Job(1)};
    ASSERT_TRUE(store->Commit(b).ok());
  }
  // Back to version 1, as a store written before the lease existed (and before specs were shared).
  Sql(url,
      "DROP TABLE specs; ALTER TABLE jobs DROP COLUMN spec_key; ALTER TABLE jobs ADD COLUMN spec "
      "TEXT NOT NULL "
      "DEFAULT '{}'; DROP FUNCTION hangar_check_epoch(BIGINT); DROP TABLE lease; DROP TABLE "
      "changes; DROP TABLE history; DELETE FROM "
      "schema_version WHERE version > 1");
  ASSERT_EQ(Sql(url, "SELECT max(version) FROM schema_version"), "1");
  auto store = std::move(OpenStore(url)).value();
  EXPECT_EQ(Sql(url, "SELECT max(version) FROM schema_version"),
            std::to_string(pg::LatestSchemaVersion()));
  EXPECT_EQ(store->Load()->jobs.size(), 1u);
  EXPECT_TRUE(store->AcquireLease("controller-a", 1000).ok()) << "migration 2 made the lease";
  auto changes = store->ChangesSince(0);
  ASSERT_TRUE(changes.ok()) << "migration 3 made the change log: " << changes.status().ToString();
  EXPECT_EQ(changes->rev, 0) << "no commit since the migration";
  EXPECT_EQ(store->Load()->rev, 0);
}

TEST(PostgresStoreTest, ANewerSchemaIsRefused) {
  const std::string url = testing::FreshDatabaseUrl();
  ASSERT_TRUE(OpenStore(url).ok());
  Sql(url, "INSERT INTO schema_version (version) VALUES (999)");
  auto s = OpenStore(url);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.status().message(),
            "the store " + url + " has schema version 999, newer than this hangar knows (up to " +
                std::to_string(pg::LatestSchemaVersion()) +
                "); run the newer hangar that wrote it, or restore a backup into an empty "
                "database");
}

TEST(PostgresStoreTest, AnUnreachableServerIsNamedWithoutItsPassword) {
  const int port = PickFreePort("127.0.0.1");
  const std::string url = "postgres://hangar:s3cret@127.0.0.1:" + std::to_string(port) + "/hangar";
  auto s = OpenStore(url);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  const std::string& m = s.status().message();
  EXPECT_EQ(m.rfind("cannot reach the store postgres://hangar@127.0.0.1:" + std::to_string(port) +
                        "/hangar: ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("check that PostgreSQL runs there"), std::string::npos) << m;
  EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;
}

TEST(PostgresStoreTest, AMissingDatabaseAndABadUrlAreExplained) {
  testing::PostgresServer* server = testing::SharedPostgres();
  ASSERT_NE(server, nullptr);
  auto missing = OpenStore(server->Url("no_such_db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("database \"no_such_db\" does not exist"),
            std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("createdb"), std::string::npos);
  auto bad = OpenStore("postgres://hangar:pw@127.0.0.1/db?colour=blue");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  EXPECT_EQ(bad.status().message(),
            "the store URL postgres://hangar@127.0.0.1/db?colour=blue is not a PostgreSQL "
            "URL libpq understands (invalid URI query parameter: \"colour\"); write it as "
            "postgres://USER@HOST:PORT/DATABASE");
}

TEST(PostgresStoreTest, AFailedBatchWritesNothingAndTheStoreGoesOn) {
  const std::string url = testing::FreshDatabaseUrl();
  auto store = std::move(OpenStore(url)).value();
  // The events statement, after the jobs' and the nodes', fails on the server.
  Sql(url,
      "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; "
      "END $$; "
      "CREATE TRIGGER boom BEFORE INSERT ON events FOR EACH ROW WHEN (NEW.message = 'boom') "
      "EXECUTE FUNCTION boom()");
  StoreBatch b;
  b.jobs = {Job(1)};
  b.nodes = {{"n1", "{}"}};
  b.events = {{0, 1, "job", "job/1", "boom"}};
  Status s = store->Commit(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("boom"), std::string::npos) << s.message();
  auto c = store->Load();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->jobs.empty());
  EXPECT_TRUE(c->nodes.empty());
  StoreBatch next;
  next.jobs = {Job(2)};
  ASSERT_TRUE(store->Commit(next).ok());
  EXPECT_EQ(store->Load()->jobs.size(), 1u);
}

TEST(PostgresStoreTest, TextThatPostgresCannotHoldIsStoredAsReplacementCharacters) {
  auto store = std::move(OpenStore(testing::FreshDatabaseUrl())).value();
  StoreBatch b;
  b.jobs = {Job(1)};
  b.jobs[0].message = std::string("exit") + '\0' + "code \xff\xfe \"q\" \\ {a,b} caf\xc3\xa9";
  ASSERT_TRUE(store->Commit(b).ok());
  EXPECT_EQ(store->Load()->jobs.at(0).message,
            "exit\xEF\xBF\xBD"
            "code \xEF\xBF\xBD\xEF\xBF\xBD \"q\" \\ {a,b} caf\xc3\xa9");
}

TEST(PostgresStoreTest, TwoStoresOnOneDatabaseSeeEachOthersCommits) {
  const std::string url = testing::FreshDatabaseUrl();
  auto a = std::move(OpenStore(url)).value();
  auto b = std::move(OpenStore(url)).value();
  StoreBatch batch;
  batch.jobs = {Job(5)};
  batch.events = {{0, 1, "job", "job/5", "submitted"}};
  ASSERT_TRUE(a->Commit(batch).ok());
  auto c = b->Load();
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].id, 5u);
  EXPECT_EQ(b->Events("job/5", 10)->size(), 1u);
  EXPECT_EQ(a->Describe(), url);
}

}  // namespace
}  // namespace hangar::controller
