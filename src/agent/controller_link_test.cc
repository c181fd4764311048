#include "agent/controller_link.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "agent/task_journal.h"

namespace hangar::agent {
namespace {

// A stream that keeps what is written to it (and can refuse writes, as a broken stream does).
class KeptStream : public ControllerLink::Stream {
 public:
  bool Write(const pb::AgentMessage& m, grpc::WriteOptions) override {
    if (broken) return false;
    written.push_back(m);
    return true;
  }
  bool WritesDone() override { return true; }
  grpc::Status Finish() override { return grpc::Status::OK; }
  void WaitForInitialMetadata() override {}
  bool NextMessageSize(uint32_t* sz) override {
    *sz = 0;
    return false;
  }
  bool Read(pb::ControllerMessage*) override { return false; }
  std::vector<pb::AgentMessage> written;
  bool broken = false;
};

class ControllerLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("controller-link-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

pb::CheckpointDone Done(const std::string& task, uint64_t step) {
  pb::CheckpointDone d;
  d.set_task_id(task);
  d.set_step(step);
  return d;
}

TEST_F(ControllerLinkTest, ReportsWaitForTheNextStreamAndOtherMessagesDoNot) {
  ControllerLink link("node-1", dir_, "c:1");
  pb::AgentMessage beat;
  beat.mutable_heartbeat()->set_seq(link.NextHeartbeatSeq());
  EXPECT_FALSE(link.Write(beat));  // no stream: dropped
  EXPECT_FALSE(link.WriteOrHold(Done("1.0.0", 5)));
  EXPECT_FALSE(link.WriteOrHold(Done("1.0.0", 7)));  // the latest of a task is kept
  EXPECT_FALSE(link.WriteOrHold(Done("2.0.0", 1)));
  KeptStream stream;
  grpc::ClientContext call;
  std::map<std::string, pb::CheckpointDone> held = link.Attach(&stream, &call);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held["1.0.0"].step(), 7u);
  EXPECT_EQ(held["2.0.0"].step(), 1u);
  EXPECT_TRUE(link.Attach(&stream, &call).empty());  // handed over once
  EXPECT_TRUE(link.Write(beat));
  EXPECT_TRUE(link.WriteOrHold(Done("3.0.0", 2)));
  ASSERT_EQ(stream.written.size(), 2u);
  EXPECT_EQ(stream.written[1].checkpoint_done().task_id(), "3.0.0");
  // A write the stream refuses holds the report as if no stream were up.
  stream.broken = true;
  EXPECT_FALSE(link.WriteOrHold(Done("4.0.0", 9)));
  link.Detach();
  EXPECT_FALSE(link.Write(beat));
  EXPECT_EQ(link.Attach(&stream, &call).count("4.0.0"), 1u);
  link.Detach();
  link.Cancel();  // no call: nothing to cancel
  EXPECT_EQ(link.NextHeartbeatSeq(), 2u);
}

TEST_F(ControllerLinkTest, AnOlderEpochOrAnotherStoreIsRefusedAndTheFirstStoreIsKept) {
  ControllerLink link("node-1", dir_, "a:1,b:2,,c:3");
  EXPECT_EQ(link.NextController(), "a:1");
  EXPECT_EQ(link.NextController(), "b:2");
  EXPECT_EQ(link.NextController(), "c:3");
  EXPECT_EQ(link.NextController(), "a:1");
  link.LoadStoreId();
  EXPECT_EQ(link.store_id(), "");
  pb::ControllerMessage m;
  m.set_epoch(3);
  m.set_store_id("store-A");
  EXPECT_TRUE(link.Accept(m, "a:1"));
  EXPECT_EQ(link.store_id(), "store-A");
  EXPECT_EQ(ReadStoreId(dir_), "store-A");  // kept across restarts
  m.set_epoch(2);
  EXPECT_FALSE(link.Accept(m, "b:2"));  // a deposed leader
  m.set_epoch(4);
  m.set_store_id("store-B");
  EXPECT_FALSE(link.Accept(m, "b:2"));  // another store
  m.clear_store_id();
  EXPECT_TRUE(link.Accept(m, "b:2"));  // says no store: taken
  ControllerLink restarted("node-1", dir_, "a:1");
  restarted.LoadStoreId();
  EXPECT_EQ(restarted.store_id(), "store-A");
  restarted.ForgetStore();
  EXPECT_EQ(restarted.store_id(), "");
  EXPECT_EQ(ReadStoreId(dir_), "");
}

TEST_F(ControllerLinkTest, ProgressGoesOutAtMostOncePerIntervalPerTask) {
  ControllerLink link("node-1", dir_, "c:1");
  const int64_t s = 1'000'000'000;
  EXPECT_TRUE(link.ProgressDue("1.0.0", 10 * s, s));
  EXPECT_FALSE(link.ProgressDue("1.0.0", 10 * s + s / 2, s));
  EXPECT_TRUE(link.ProgressDue("2.0.0", 10 * s + s / 2, s));  // another task
  EXPECT_TRUE(link.ProgressDue("1.0.0", 11 * s, s));
  link.ForgetProgress("1.0.0");
  EXPECT_TRUE(link.ProgressDue("1.0.0", 11 * s + 1, s));  // as a new task
}

}  // namespace
}  // namespace hangar::agent
