// A standby follows the store (issue 18): what it holds after catching up is what a full load
// gives, and it reads only the rows that commits wrote since.
#include "controller/store/store_follower.h"

#include <gtest/gtest.h>

#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

JobRow Job(uint64_t id, const std::string& state = "pending") {
  JobRow j;
  j.id = id;
  j.name = "job-" + std::to_string(id);
  j.queue = "default";
  j.user = "alice";
  j.state = state;
  j.SetSpec("{\"n\":" + std::to_string(id % 7) + "}");
  j.submitted = 1000 + static_cast<Time>(id);
  return j;
}

std::string Describe(const StoreContents& c) {
  std::string s;
  for (const auto& j : c.jobs) {
    s += "job " + std::to_string(j.id) + " " + j.name + " " + j.state + " " + j.spec_text() + " " +
         j.placement_json + " " + std::to_string(j.attempt) + "\n";
  }
  for (const auto& n : c.nodes) s += "node " + n.name + " " + n.state_json + "\n";
  for (const auto& v : c.values) s += "value " + v.table + "/" + v.key + "=" + v.value + "\n";
  return s;
}

// The leader's commits, then the follower's view against a full load of the same store.
void ExpectSame(StoreFollower& f, StateStore& leader) {
  auto full = leader.Load();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const StoreContents mine = f.Take();
  EXPECT_EQ(Describe(mine), Describe(*full));
  EXPECT_EQ(mine.rev, full->rev);
}

TEST(StoreFollowerTest, ReadsOnlyWhatCommitsWroteSinceAndEndsWhereAFullLoadIs) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  StoreBatch first;
  for (uint64_t id = 1; id <= 500; ++id) first.jobs.push_back(Job(id));
  first.nodes = {{"node-1", "{}"}, {"node-2", "{}"}};
  first.values = {{"meta", "next_job_id", "501", false},
                  {"queue", "tree", "q1", false},
                  {"usage", "u1", "1", false}};
  ASSERT_TRUE(leader->Commit(first).ok());

  StoreFollower f(std::move(OpenStore(url)).value());
  std::vector<const JobRow*> changed;
  ASSERT_TRUE(f.CatchUp(&changed).ok());
  EXPECT_EQ(f.full_loads(), 1);
  EXPECT_EQ(changed.size(), 500u);
  EXPECT_EQ(f.jobs(), 500u);
  const int64_t after_first = f.rev();
  EXPECT_GT(after_first, 0);

  // Nothing committed: nothing read.
  ASSERT_TRUE(f.CatchUp(&changed).ok());
  EXPECT_TRUE(changed.empty());
  EXPECT_EQ(f.rev(), after_first);

  // Three commits: a job placed, two submitted, a node drained, a value erased and one changed;
  // an events-only commit that writes no row the follower holds.
  StoreBatch placed;
  JobRow running = Job(7, "running");
  running.placement_json = "{\"tasks\":[]}";
  running.attempt = 1;
  placed.jobs = {running};
  placed.nodes = {{"node-2", "{\"drained\":true}"}};
  ASSERT_TRUE(leader->Commit(placed).ok());
  StoreBatch more;
  more.jobs = {Job(501), Job(502)};
  more.values = {{"meta", "next_job_id", "503", false}, {"usage", "u1", "", true}};
  ASSERT_TRUE(leader->Commit(more).ok());
  StoreBatch events;
  events.events = {{0, 5, "job", "job/7", "placed"}};
  ASSERT_TRUE(leader->Commit(events).ok());

  ASSERT_TRUE(f.CatchUp(&changed).ok());
  EXPECT_EQ(f.full_loads(), 1) << "a catch-up, not a reload";
  ASSERT_EQ(changed.size(), 3u) << "only the rows written since";
  EXPECT_EQ(changed[0]->id, 7u);
  EXPECT_EQ(changed[0]->state, "running");
  EXPECT_EQ(f.rows_followed(), 3);
  EXPECT_EQ(f.jobs(), 502u);
  EXPECT_GT(f.rev(), after_first);
  ExpectSame(f, *leader);
}

TEST(StoreFollowerTest, ARestoreThatEmptiedTheStoreIsLoadedAgainWhole) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  StoreBatch b;
  b.jobs = {Job(1), Job(2), Job(3)};
  ASSERT_TRUE(leader->Commit(b).ok());
  StoreFollower f(std::move(OpenStore(url)).value());
  ASSERT_TRUE(f.CatchUp().ok());
  StoreBatch restore;
  restore.erase_all = true;
  restore.jobs = {Job(10)};
  restore.values = {{"meta", "store_id", "other", false}};
  ASSERT_TRUE(leader->Commit(restore).ok());
  std::vector<const JobRow*> changed;
  ASSERT_TRUE(f.CatchUp(&changed).ok());
  EXPECT_EQ(f.full_loads(), 2);
  EXPECT_EQ(f.jobs(), 1u) << "jobs 1-3 are gone with the restore";
  ExpectSame(f, *leader);
}

TEST(StoreFollowerTest, AFollowerTheChangeLogNoLongerReachesLoadsAgainWhole) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  StoreBatch b;
  b.jobs = {Job(1)};
  ASSERT_TRUE(leader->Commit(b).ok());
  StoreFollower f(std::move(OpenStore(url)).value());
  ASSERT_TRUE(f.CatchUp().ok());
  for (uint64_t id = 2; id <= 4; ++id) {
    StoreBatch next;
    next.jobs = {Job(id, "succeeded")};
    ASSERT_TRUE(leader->Commit(next).ok());
  }
  // As the leader's pruning does when a standby was away for thousands of commits.
  testing::Sql(url, "DELETE FROM changes WHERE rev < (SELECT max(rev) FROM changes)");
  ASSERT_TRUE(f.CatchUp().ok());
  EXPECT_EQ(f.full_loads(), 2);
  EXPECT_EQ(f.jobs(), 4u);
  ExpectSame(f, *leader);
}

TEST(StoreFollowerTest, TheLeaderPrunesTheChangeLog) {
  const std::string url = testing::FreshDatabaseUrl();
  auto leader = std::move(OpenStore(url)).value();
  auto commit = [&](uint64_t id) {
    StoreBatch b;
    b.jobs = {Job(id)};
    ASSERT_TRUE(leader->Commit(b).ok());
  };
  for (uint64_t id = 1; id <= 300; ++id) commit(id);
  // Every 256 commits the rows older than the last 10,000 go; here none is that old yet.
  EXPECT_EQ(testing::Sql(url, "SELECT count(*) FROM changes"), "300");
  // As if 50,000 commits had passed since.
  testing::Sql(url, "SELECT setval(pg_get_serial_sequence('changes', 'rev'), 50000)");
  for (uint64_t id = 301; id <= 512; ++id) commit(id);
  EXPECT_EQ(testing::Sql(url, "SELECT count(*) FROM changes WHERE rev < 40000"), "0");
  EXPECT_EQ(testing::Sql(url, "SELECT count(*) FROM changes"), "212") << "the newest are kept";
}

TEST(StoreFollowerTest, StoresWithASingleOwnerCannotBeFollowed) {
  auto memory = NewMemoryStore();
  auto changes = memory->ChangesSince(0);
  ASSERT_FALSE(changes.ok());
  EXPECT_EQ(changes.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(changes.status().message().find("only a PostgreSQL store can be followed"),
            std::string::npos)
      << changes.status().message();
}

}  // namespace
}  // namespace hangar::controller
