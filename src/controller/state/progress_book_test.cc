#include "controller/state/progress_book.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

job::ProgressSpec Spec(Duration timeout, int64_t factor_milli = 0, int reports = 3) {
  job::ProgressSpec s;
  s.hang_timeout = timeout;
  s.straggler_factor_milli = factor_milli;
  s.straggler_reports = reports;
  return s;
}

TEST(ProgressBookTest, KeepsEachRanksLastStepAndWhenItCame) {
  ProgressBook book;
  const auto spec = Spec(10 * kSecond);
  book.Record(7, 0, 0, "node-1", 40, 0, 1000, spec);
  book.Record(7, 0, 1, "node-2", 39, 500'000, 1500, spec);
  book.Record(7, 0, 0, "node-1", 41, 0, 2000, spec);
  const ProgressBook::Job* j = book.Find(7);
  ASSERT_NE(j, nullptr);
  EXPECT_EQ(j->ranks.at(0).step, 41u);
  EXPECT_EQ(j->ranks.at(0).at, 2000);
  EXPECT_EQ(j->ranks.at(1).step, 39u);
  EXPECT_EQ(j->ranks.at(1).step_time_us, 500'000);
  EXPECT_EQ(j->ranks.at(1).node, "node-2");
  // An earlier attempt's late report changes nothing; a later attempt starts afresh.
  book.Record(7, 0, 0, "node-1", 42, 0, 2500, spec);
  book.Record(7, 1, 1, "node-3", 5, 0, 3000, spec);
  book.Record(7, 0, 0, "node-1", 43, 0, 3500, spec);
  j = book.Find(7);
  EXPECT_EQ(j->attempt, 1u);
  EXPECT_EQ(j->ranks.size(), 1u);
  EXPECT_EQ(j->ranks.at(1).step, 5u);
  auto json = book.Json(7);
  EXPECT_EQ(json["attempt"], 1);
  EXPECT_EQ(json["ranks"][0]["node"], "node-3");
  EXPECT_TRUE(json["hung_at_ms"].is_null());
  EXPECT_TRUE(book.Json(8).is_null());
}

TEST(ProgressBookTest, ARankSilentForTheTimeoutWhileItRunsIsHungOnce) {
  ProgressBook book;
  const auto spec = Spec(10 * kSecond);
  const Time start = 100'000;
  book.Record(3, 0, 0, "a", 10, 0, start + 1000, spec);
  book.Record(3, 0, 1, "b", 10, 0, start + 1000, spec);
  book.Record(3, 0, 0, "a", 20, 0, start + 5000, spec);  // rank 1 stops at step 10
  EXPECT_FALSE(book.CheckHang(3, 0, start, spec.hang_timeout, {0, 1}, start + 10'999));
  auto h = book.CheckHang(3, 0, start, spec.hang_timeout, {0, 1}, start + 11'000);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->ranks.size(), 1u);
  EXPECT_EQ(h->ranks[0].rank, 1u);
  EXPECT_EQ(h->ranks[0].node, "b");
  EXPECT_EQ(h->ranks[0].step, 10u);
  EXPECT_EQ(h->ranks[0].for_ms, 10'000);
  EXPECT_EQ(h->last_step, 20u);
  EXPECT_FALSE(book.CheckHang(3, 0, start, spec.hang_timeout, {0, 1}, start + 60'000))
      << "once per attempt";
  EXPECT_EQ(book.Json(3)["hung_at_ms"], start + 11'000);
  // Its next attempt is watched again.
  book.Record(3, 1, 0, "a", 21, 0, start + 70'000, spec);
  EXPECT_TRUE(book.CheckHang(3, 1, start + 69'000, spec.hang_timeout, {0, 1}, start + 80'000));
}

TEST(ProgressBookTest, RanksThatNeverReportAndEndedRanksDoNotHangAJob) {
  ProgressBook book;
  const auto spec = Spec(10 * kSecond);
  // Only rank 0 reports (a loop that logs on rank 0): the job is watched through it.
  for (Time t = 0; t <= 60'000; t += 5000) book.Record(4, 0, 0, "a", t / 1000, 0, t, spec);
  EXPECT_FALSE(book.CheckHang(4, 0, 0, spec.hang_timeout, {0, 1, 2}, 62'000));
  // Rank 0 went silent but has ended (its task exited): not a hang of the ranks still running.
  EXPECT_FALSE(book.CheckHang(4, 0, 0, spec.hang_timeout, {1, 2}, 90'000));
  EXPECT_TRUE(book.CheckHang(4, 0, 0, spec.hang_timeout, {0, 1, 2}, 90'000));
}

TEST(ProgressBookTest, AnAttemptThatNeverReportsIsHungAfterTheTimeoutFromItsStart) {
  ProgressBook book;
  EXPECT_FALSE(book.CheckHang(5, 2, 50'000, 30 * kSecond, {0}, 79'999));
  auto h = book.CheckHang(5, 2, 50'000, 30 * kSecond, {0}, 80'000);
  ASSERT_TRUE(h);
  EXPECT_TRUE(h->ranks.empty());
  EXPECT_EQ(h->silent_for, 30'000);
  EXPECT_FALSE(book.CheckHang(5, 2, 50'000, 30 * kSecond, {0}, 90'000));
  // A job without a timeout is never hung.
  EXPECT_FALSE(book.CheckHang(6, 0, 0, 0, {0}, 1'000'000'000));
}

TEST(ProgressBookTest, ARankPersistentlySlowerThanTheMedianIsNamedOnce) {
  ProgressBook book;
  const auto spec = Spec(0, 1500, 3);  // 1.5x the median, 3 reports in a row
  Time t = 0;
  auto round = [&](int64_t slow_us) {
    std::optional<ProgressBook::Straggler> named;
    for (uint32_t r = 0; r < 4; ++r) {
      auto s = book.Record(9, 0, r, "node-" + std::to_string(r), static_cast<uint64_t>(t),
                           r == 2 ? slow_us : 100'000, t, spec);
      if (s) named = s;
    }
    t += 1000;
    return named;
  };
  EXPECT_FALSE(round(140'000));  // 1.4x: within the factor
  EXPECT_FALSE(round(200'000));
  EXPECT_FALSE(round(200'000));
  EXPECT_FALSE(round(120'000)) << "a fast report starts the count again";
  EXPECT_FALSE(round(200'000));
  EXPECT_FALSE(round(200'000));
  auto named = round(200'000);
  ASSERT_TRUE(named);
  EXPECT_EQ(named->rank, 2u);
  EXPECT_EQ(named->node, "node-2");
  EXPECT_EQ(named->step_time_us, 200'000);
  EXPECT_EQ(named->median_us, 100'000);
  EXPECT_FALSE(round(300'000)) << "named once per attempt";
  EXPECT_TRUE(book.Find(9)->ranks.at(2).straggler);
  EXPECT_EQ(book.Json(9)["ranks"][2]["straggler"], true);
  EXPECT_EQ(book.Json(9)["ranks"][2]["step_time_s"], 0.3);
}

TEST(ProgressBookTest, TwoRanksCompareWithTheFasterOne) {
  ProgressBook book;
  const auto spec = Spec(0, 1500, 1);
  book.Record(1, 0, 0, "a", 1, 100'000, 0, spec);
  auto s = book.Record(1, 0, 1, "b", 1, 200'000, 0, spec);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rank, 1u);
  EXPECT_EQ(s->median_us, 100'000);
}

}  // namespace
}  // namespace hangar::controller
