#include "controller/store/state_store.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace hangar::controller {
namespace {

// The same contract for both implementations.
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<StateStore> Open() {
    auto s = OpenStore(url_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  void SetUp() override {
    if (GetParam() == "sqlite") {
      dir_ = ::testing::TempDir() + "/store-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::filesystem::remove_all(dir_);
      url_ = "sqlite://" + dir_ + "/state.db";
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
  j.spec_json = R"({"name":"x"})";
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

TEST_P(StoreTest, SurvivesReopen) {
  if (GetParam() != "sqlite") GTEST_SKIP() << "the memory store forgets by design";
  {
    auto store = Open();
    StoreBatch b;
    b.jobs = {Job(7, "pending")};
    ASSERT_TRUE(store->Commit(b).ok());
  }
  auto store = Open();
  auto c = store->Load();
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->jobs.size(), 1u);
  EXPECT_EQ(c->jobs[0].id, 7u);
  EXPECT_EQ(c->jobs[0].user, "alice");
}

INSTANTIATE_TEST_SUITE_P(Both, StoreTest, ::testing::Values("sqlite", "memory"));

TEST(StoreUrlTest, BadUrlsAreExplained) {
  auto s = OpenStore("postgres://x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("use sqlite:///path/to/state.db or memory://"), std::string::npos);
  auto unwritable = OpenStore("sqlite:///proc/nope/state.db");
  EXPECT_FALSE(unwritable.ok());
}

}  // namespace
}  // namespace hangar::controller
