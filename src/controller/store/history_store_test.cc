// The history's rows in every store: a round trip, the hourly roll-up and the pruning that bound
// it (HistoryUpkeep), and a reopened store that still holds them.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "controller/store/state_store.h"
#include "controller/store/testing/shared_postgres.h"

namespace hangar::controller {
namespace {

class HistoryStoreTest : public ::testing::TestWithParam<std::string> {
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
      dir_ = ::testing::TempDir() + "/history-" + std::to_string(::getpid()) + "-" + name;
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

constexpr Duration kMin = 60'000;

HistoryRow Sample(Time t, double allocated, double pending) {
  return {t, kMin, 16, allocated, allocated / 2, allocated / 2, pending, allocated / 4};
}

TEST_P(HistoryStoreTest, SamplesComeBackInTimeOrderFromSince) {
  auto store = Open();
  StoreBatch b;
  b.history = {Sample(3 * kMin, 8, 2), Sample(kMin, 4, 1), Sample(2 * kMin, 6, 1.5)};
  ASSERT_TRUE(store->Commit(b).ok());
  auto rows = store->History(false, 2 * kMin);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].time, 2 * kMin);
  EXPECT_EQ((*rows)[0].step, kMin);
  EXPECT_DOUBLE_EQ((*rows)[0].gpus, 16);
  EXPECT_DOUBLE_EQ((*rows)[0].allocated, 6);
  EXPECT_DOUBLE_EQ((*rows)[0].busy, 3);
  EXPECT_DOUBLE_EQ((*rows)[0].idle, 3);
  EXPECT_DOUBLE_EQ((*rows)[0].pending, 1.5);
  EXPECT_DOUBLE_EQ((*rows)[0].running, 1.5);
  EXPECT_EQ((*rows)[1].time, 3 * kMin);
  EXPECT_TRUE(store->History(true, 0)->empty()) << "no hour was rolled up";
}

TEST_P(HistoryStoreTest, UpkeepRollsWholeHoursUpOnceAndDropsWhatIsPastItsRetention) {
  auto store = Open();
  StoreBatch b;
  // Hour 0: two samples; hour 1: two; hour 2 (the current one) one.
  b.history = {Sample(10 * kMin, 2, 0), Sample(20 * kMin, 4, 2), Sample(kHistoryHour + kMin, 8, 4),
               Sample(kHistoryHour + 2 * kMin, 8, 6), Sample(2 * kHistoryHour + kMin, 16, 8)};
  ASSERT_TRUE(store->Commit(b).ok());
  StoreBatch upkeep;
  // Now is 2h05m: hours 0 and 1 are whole; samples older than 1h30m go.
  upkeep.history_upkeep = {2 * kHistoryHour + 5 * kMin, kHistoryHour + 30 * kMin, 0};
  ASSERT_TRUE(store->Commit(upkeep).ok());
  auto hours = store->History(true, 0);
  ASSERT_TRUE(hours.ok()) << hours.status().ToString();
  ASSERT_EQ(hours->size(), 2u);
  EXPECT_EQ((*hours)[0].time, 0);
  EXPECT_EQ((*hours)[0].step, kHistoryHour);
  EXPECT_DOUBLE_EQ((*hours)[0].allocated, 3);
  EXPECT_DOUBLE_EQ((*hours)[0].pending, 1);
  EXPECT_EQ((*hours)[1].time, kHistoryHour);
  EXPECT_DOUBLE_EQ((*hours)[1].allocated, 8);
  EXPECT_DOUBLE_EQ((*hours)[1].pending, 5);
  auto samples = store->History(false, 0);
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 1u) << "every sample before 1h30m was dropped";
  EXPECT_EQ((*samples)[0].time, 2 * kHistoryHour + kMin);

  // An hour rolled up is kept as it is, though its samples are gone; hourly rows past their
  // retention go.
  StoreBatch later;
  later.history_upkeep = {3 * kHistoryHour + kMin, 0, kHistoryHour};
  ASSERT_TRUE(store->Commit(later).ok());
  hours = store->History(true, 0);
  ASSERT_EQ(hours->size(), 2u);
  EXPECT_EQ((*hours)[0].time, kHistoryHour);
  EXPECT_DOUBLE_EQ((*hours)[0].allocated, 8);
  EXPECT_EQ((*hours)[1].time, 2 * kHistoryHour);
  EXPECT_DOUBLE_EQ((*hours)[1].allocated, 16);
}

TEST_P(HistoryStoreTest, ARestoreThatEmptiesTheStoreEmptiesTheHistory) {
  auto store = Open();
  StoreBatch b;
  b.history = {Sample(kMin, 4, 1)};
  ASSERT_TRUE(store->Commit(b).ok());
  StoreBatch erase;
  erase.erase_all = true;
  ASSERT_TRUE(store->Commit(erase).ok());
  EXPECT_TRUE(store->History(false, 0)->empty());
}

class DurableHistoryTest : public HistoryStoreTest {};

TEST_P(DurableHistoryTest, HistorySurvivesAReopen) {
  {
    auto store = Open();
    StoreBatch b;
    b.history = {Sample(kMin, 4, 1)};
    ASSERT_TRUE(store->Commit(b).ok());
  }
  auto store = Open();
  auto rows = store->History(false, 0);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_DOUBLE_EQ((*rows)[0].allocated, 4);
}

// A SQLite store from before the history (schema version 1) is upgraded at open, its jobs kept.
TEST(HistoryMigrationTest, ASqliteStoreOfVersionOneGainsTheHistory) {
  const std::string dir = ::testing::TempDir() + "/history-migrate-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string path = dir + "/state.db";
  {
    auto store = std::move(OpenStore("sqlite://" + path)).value();
    JobRow j;
    j.id = 1;
    j.name = "a";
    j.queue = "default";
    j.user = "alice";
    j.state = "pending";
    j.SetSpec("{}");
    StoreBatch b;
    b.jobs = {j};
    ASSERT_TRUE(store->Commit(b).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "DROP TABLE history; PRAGMA user_version = 1", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  auto store = OpenStore("sqlite://" + path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Load()->jobs.size(), 1u);
  StoreBatch b;
  b.history = {Sample(kMin, 4, 1)};
  ASSERT_TRUE((*store)->Commit(b).ok());
  EXPECT_EQ((*store)->History(false, 0)->size(), 1u);
  store->reset();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(AllStores, HistoryStoreTest,
                         ::testing::Values("memory", "sqlite", "postgres"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Durable, DurableHistoryTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace hangar::controller
