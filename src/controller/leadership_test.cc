// LeaseKeeper (issue 18) against a PostgreSQL server of the test's own.
#include "controller/leadership.h"

#include <gtest/gtest.h>

#include <thread>

#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

LeaseOptions Options(const std::string& url, const std::string& name) {
  LeaseOptions o;
  o.url = url;
  o.name = name;
  o.api = "http://127.0.0.1:1";
  o.ttl = 2000;  // a loaded test machine can stall a renewal for most of a second
  o.renew_every = 100;
  o.poll_every = 50;
  return o;
}

TEST(LeaseKeeperTest, LeadsRenewsAndStopsWhenTakenOver) {
  const std::string url = testing::FreshDatabaseUrl();
  LeaseKeeper a(Options(url, "ctl-a"));
  std::atomic<bool> stop{false};
  ASSERT_EQ(a.Acquire(stop, [](const LeaderInfo&) {}).value(), 1);
  a.StartRenewing();
  std::this_thread::sleep_for(std::chrono::milliseconds(4500));  // over twice its lease
  EXPECT_EQ(a.Lost(), "") << "its renewals keep it";
  EXPECT_EQ(a.Me().epoch, 1);

  // A standby sees who leads, and gives up when told to stop.
  LeaseKeeper b(Options(url, "ctl-b"));
  LeaderInfo seen;
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    stop = true;
  });
  EXPECT_FALSE(b.Acquire(stop, [&seen](const LeaderInfo& l) { seen = l; }).ok());
  stopper.join();
  EXPECT_EQ(seen.name, "ctl-a");
  EXPECT_EQ(seen.api, "http://127.0.0.1:1");
  EXPECT_EQ(seen.epoch, 1);
  EXPECT_GT(seen.left, 0);

  // Another took the lease behind its back: its next renewal is refused, and it must stop.
  testing::Sql(url, "UPDATE lease SET epoch = 5, holder = 'ctl-x (http://127.0.0.1:9)'");
  for (int i = 0; i < 100 && a.Lost().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(a.Lost().find("was taken over by ctl-x (http://127.0.0.1:9) at epoch 5"),
            std::string::npos)
      << a.Lost();
}

TEST(LeaseKeeperTest, OptionsAreChecked) {
  LeaseOptions o = Options("postgres://x", "ctl-a");
  EXPECT_TRUE(CheckLeaseOptions(o).ok());
  o.renew_every = o.ttl / 2 + 1;  // more than half the lease
  EXPECT_EQ(CheckLeaseOptions(o).code(), StatusCode::kInvalidArgument);
  o = Options("postgres://x", "bad (name)");
  EXPECT_EQ(CheckLeaseOptions(o).code(), StatusCode::kInvalidArgument);
}

TEST(LeaseKeeperTest, HolderTextRoundTrips) {
  LeaseRow row;
  row.holder = HolderText("ctl-a", "https://10.0.0.1:8080");
  row.epoch = 3;
  const LeaderInfo l = ParseLease(row);
  EXPECT_EQ(l.name, "ctl-a");
  EXPECT_EQ(l.api, "https://10.0.0.1:8080");
  EXPECT_EQ(l.epoch, 3);
  EXPECT_TRUE(LeaderInfo{}.ToJson().is_null());
}

}  // namespace
}  // namespace hangar::controller
