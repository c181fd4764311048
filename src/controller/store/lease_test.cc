// The leadership lease (issue 18, item 2, the store's side): two stores on one database.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

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
