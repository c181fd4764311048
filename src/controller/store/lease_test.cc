// The leadership lease (issue 18, item 2, the store's side): two stores on one database.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "controller/store/postgres_conn.h"
#include "controller/store/state_store.h"
#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

StoreBatch OneJob(uint64_t id) {
  StoreBatch b;
  JobRow j;
  j.id = id;
  j.name = "job";
  j.state = "pending";
  b.jobs = {j};
  b.events = {{0, 1, "job", "job/" + std::to_string(id), "submitted"}};
  return b;
}

// The lease's time runs out on the server's clock, as if its holder had stalled past it.
void ExpireLease(const std::string& url) {
  testing::Sql(url, "UPDATE lease SET expires_at = clock_timestamp() - interval '1 millisecond'");
}

TEST(LeaseTest, ATakeoverFencesTheOldLeadersCommits) {
  const std::string url = testing::FreshDatabaseUrl();
  auto a = std::move(OpenStore(url)).value();
  auto b = std::move(OpenStore(url)).value();
  auto first = a->AcquireLease("controller-a", 60'000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 1);
  auto refused = b->AcquireLease("controller-b", 10'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("is led by controller-a (epoch 1)"), std::string::npos)
      << refused.status().message();
  ASSERT_TRUE(a->Commit(OneJob(1)).ok());

  ExpireLease(url);
  auto second = b->AcquireLease("controller-b", 10'000);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, 2) << "the epoch grows at every takeover";

  Status stale = a->Commit(OneJob(2));
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(IsFenced(stale)) << stale.ToString();
  EXPECT_NE(
      stale.message().find("lease (epoch 1) is no longer current: controller-b leads at epoch 2"),
      std::string::npos)
      << stale.message();
  Status renew = a->RenewLease(60'000);
  EXPECT_TRUE(IsFenced(renew)) << renew.ToString();
  EXPECT_NE(renew.message().find("was taken over by controller-b at epoch 2"), std::string::npos)
      << renew.message();

  ASSERT_TRUE(b->Commit(OneJob(3)).ok());
  ASSERT_TRUE(b->RenewLease(10'000).ok());
  auto c = b->Load();
  ASSERT_EQ(c->jobs.size(), 2u);
  EXPECT_EQ(c->jobs[0].id, 1u);
  EXPECT_EQ(c->jobs[1].id, 3u) << "nothing of the fenced batch was written";
  EXPECT_TRUE(b->Events("job/2", 10)->empty());
}

TEST(LeaseTest, AnExpiredLeaseIsNotRenewedButTakenAgainWithANewEpoch) {
  const std::string url = testing::FreshDatabaseUrl();
  auto a = std::move(OpenStore(url)).value();
  EXPECT_EQ(a->RenewLease(60'000).code(), StatusCode::kFailedPrecondition) << "no lease yet";
  ASSERT_EQ(a->AcquireLease("controller-a", 60'000).value(), 1);
  ASSERT_TRUE(a->RenewLease(60'000).ok());
  ExpireLease(url);
  Status expired = a->RenewLease(60'000);
  EXPECT_TRUE(IsFenced(expired));
  EXPECT_NE(expired.message().find("(epoch 1) expired before it was renewed"), std::string::npos)
      << expired.message();
  // Nobody took over: its commits still pass the fence (no other leader could have written).
  EXPECT_TRUE(a->Commit(OneJob(1)).ok());
  EXPECT_EQ(a->AcquireLease("controller-a", 60'000).value(), 2);
}

// The controller takes and renews the lease on a connection of its own, and commits on another that
// adopts the epoch (issue 18): that one is fenced like the holder.
TEST(LeaseTest, AnAdoptedEpochIsReadBackAndFenced) {
  const std::string url = testing::FreshDatabaseUrl();
  auto lease = std::move(OpenStore(url)).value();
  auto commits = std::move(OpenStore(url)).value();
  EXPECT_EQ(commits->ReadLease().value().epoch, 0) << "nobody took it yet";
  ASSERT_EQ(lease->AcquireLease("ctl-a (http://127.0.0.1:1)", 60'000).value(), 1);
  const LeaseRow row = commits->ReadLease().value();
  EXPECT_EQ(row.holder, "ctl-a (http://127.0.0.1:1)");
  EXPECT_EQ(row.epoch, 1);
  EXPECT_GT(row.left, 50'000);
  EXPECT_GT(row.acquired, 1'700'000'000'000) << "ms since the Unix epoch";
  EXPECT_EQ(commits->AdoptLease(0).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(commits->AdoptLease(1).ok());
  ASSERT_TRUE(commits->Commit(OneJob(1)).ok());
  ExpireLease(url);
  auto other = std::move(OpenStore(url)).value();
  ASSERT_EQ(other->AcquireLease("ctl-b (http://127.0.0.1:2)", 60'000).value(), 2);
  Status stale = commits->Commit(OneJob(2));
  EXPECT_TRUE(IsFenced(stale)) << stale.ToString();
  EXPECT_TRUE(IsFenced(lease->RenewLease(60'000)));
  EXPECT_EQ(NewMemoryStore()->ReadLease().status().code(), StatusCode::kUnimplemented);
}

// A leader's commit holds the fence check's lock on the lease row until it ends; a big one
// (81,920 new jobs: 1.5-2 s) must not keep the leader from renewing its lease meanwhile, or a
// healthy leader loses it. A takeover, though, waits for it: every commit of the old epoch comes
// first.
TEST(LeaseTest, ACommitInFlightLetsItsLeaderRenewButHoldsATakeoverBack) {
  const std::string url = testing::FreshDatabaseUrl();
  auto a = std::move(OpenStore(url)).value();
  ASSERT_EQ(a->AcquireLease("controller-a", 60'000).value(), 1);
  pg::Connection commit;  // the leader's commit in flight, as its store runs one
  ASSERT_TRUE(commit.Connect(url).ok());
  ASSERT_TRUE(commit.Exec("BEGIN").ok());
  auto checked = commit.Exec("SELECT hangar_check_epoch(1)");
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();

  auto renew = std::async(std::launch::async, [&] { return a->RenewLease(60'000); });
  const bool renewed_in_time = renew.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!renewed_in_time) (void)commit.Exec("ROLLBACK");  // let it go, then fail
  ASSERT_TRUE(renewed_in_time) << "the renewal waited for the leader's own commit";
  EXPECT_TRUE(renew.get().ok());

  ExpireLease(url);  // the leader stalls past its lease while its commit is still in flight
  auto b = std::move(OpenStore(url)).value();
  auto takeover =
      std::async(std::launch::async, [&] { return b->AcquireLease("controller-b", 60'000); });
  EXPECT_EQ(takeover.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "a takeover must wait until the old leader's commit in flight has ended";
  ASSERT_TRUE(commit.Exec("COMMIT").ok());
  auto epoch = takeover.get();
  ASSERT_TRUE(epoch.ok()) << epoch.status().ToString();
  EXPECT_EQ(*epoch, 2);
  EXPECT_TRUE(IsFenced(a->Commit(OneJob(1))));
}

// Two controllers, or a leader and its standby's follower, opening one new database at once.
TEST(LeaseTest, StoresOpenedAtOnceOnANewDatabaseAllMigrateIt) {
  const std::string url = testing::FreshDatabaseUrl();
  std::vector<std::future<Status>> opens;
  for (int i = 0; i < 4; ++i) {
    opens.push_back(std::async(std::launch::async, [&] { return OpenStore(url).status(); }));
  }
  for (auto& o : opens) {
    const Status s = o.get();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
}

TEST(LeaseTest, StoresWithOneOwnerHaveNoLease) {
  const std::string dir = ::testing::TempDir() + "/lease-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto sqlite = std::move(OpenStore("sqlite://" + dir + "/state.db")).value();
  auto lease = sqlite->AcquireLease("controller-a", 1000);
  EXPECT_EQ(lease.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(lease.status().message().find("leader election needs a PostgreSQL store"),
            std::string::npos);
  EXPECT_EQ(OpenStore("sqlite://" + dir + "/state.db").status().code(),
            StatusCode::kFailedPrecondition)
      << "SQLite still refuses a second owner";
  EXPECT_EQ(NewMemoryStore()->AcquireLease("x", 1000).status().code(), StatusCode::kUnimplemented);
  sqlite.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hangar::controller
