#include "sim/goodput.h"

#include <gtest/gtest.h>

namespace hangar::sim {
namespace {

// The ledger's books balance: every millisecond since the first start is kept progress, lost
// work, restore, slowdown or down time.
void ExpectBalanced(const TrainingLedger& l, Time now) {
  Duration down = 0;
  for (int c = 0; c < kDownCauses; ++c) down += l.down(static_cast<DownCause>(c));
  EXPECT_NEAR(static_cast<double>(l.kept() + l.lost_work() + l.restore() + l.slowdown() + down),
              static_cast<double>(now - l.first_start()), 2.0);
}

TEST(BoundEttrTest, HalfAnIntervalPlusTheRestorePerInterruption) {
  // Llama 3's rate on 16,384 GPUs: 419 interruptions in 54 days.
  const double lambda = 419.0 / (54 * 24);
  EXPECT_NEAR(BoundEttr(lambda, 30 * kMinute, 5 * kMinute), 1 - lambda * (0.25 + 5.0 / 60), 1e-12);
  EXPECT_NEAR(BoundEttr(lambda, 10 * kMinute, 5 * kMinute), 1 - lambda * (10.0 / 60), 1e-12);
  EXPECT_EQ(BoundEttr(100, 10 * kHour, 0), 0.0);  // losses beyond the wall time
  EXPECT_EQ(BoundEttr(0, 10 * kMinute, kMinute), 1.0);
}

TEST(TrainingLedgerTest, AnInterruptionLosesTheWorkSinceTheLastCheckpoint) {
  TrainingLedger l(10 * kHour, kHour);
  l.Start(0, 0, DownCause::kRecovery);
  EXPECT_EQ(l.DoneAt(), 10 * kHour);
  EXPECT_EQ(l.NextCheckpointAfter(2 * kHour + 30 * kMinute), 3 * kHour);
  l.Interrupt(2 * kHour + 30 * kMinute);
  EXPECT_EQ(l.kept(), 2 * kHour);
  EXPECT_EQ(l.lost_work(), 30 * kMinute);
  EXPECT_EQ(l.DoneAt(), kNever);
  // Back 30 minutes later, with a 15-minute restore.
  l.Start(3 * kHour, 15 * kMinute, DownCause::kWaitForNode);
  EXPECT_EQ(l.down(DownCause::kWaitForNode), 30 * kMinute);
  EXPECT_EQ(l.RunProgress(3 * kHour + 10 * kMinute), 0);
  EXPECT_EQ(l.DoneAt(), 3 * kHour + 15 * kMinute + 8 * kHour);
  l.Finish(l.DoneAt());
  EXPECT_TRUE(l.done());
  EXPECT_EQ(l.restore(), 15 * kMinute);
  EXPECT_EQ(l.interruptions(), 1);
  EXPECT_DOUBLE_EQ(l.Ettr(11 * kHour + 15 * kMinute), 10.0 / 11.25);
  ExpectBalanced(l, 11 * kHour + 15 * kMinute);
}

TEST(TrainingLedgerTest, AnInterruptionDuringTheRestoreLosesOnlyTime) {
  TrainingLedger l(10 * kHour, kHour);
  l.Start(0, 0, DownCause::kRecovery);
  l.Interrupt(kHour);  // at a checkpoint: nothing lost
  EXPECT_EQ(l.lost_work(), 0);
  l.Start(kHour + kMinute, 10 * kMinute, DownCause::kRecovery);
  l.Interrupt(kHour + 5 * kMinute);
  EXPECT_EQ(l.kept(), kHour);
  EXPECT_EQ(l.restore(), 4 * kMinute);
  ExpectBalanced(l, kHour + 5 * kMinute);
}

TEST(TrainingLedgerTest, InterruptedBeforeItsPlannedStartBooksOnlyTheTimeDown) {
  TrainingLedger l(10 * kHour, kHour);
  l.Start(0, 0, DownCause::kRecovery);
  l.Interrupt(30 * kMinute);
  l.Start(40 * kMinute, 5 * kMinute, DownCause::kRecovery);  // planned at 30m for 40m
  l.Interrupt(35 * kMinute);                                 // another node fails first
  EXPECT_EQ(l.down(DownCause::kRecovery), 5 * kMinute);
  l.Start(50 * kMinute, 5 * kMinute, DownCause::kWaitForNode);
  EXPECT_EQ(l.down(DownCause::kWaitForNode), 15 * kMinute);
  ExpectBalanced(l, 50 * kMinute);
}

TEST(TrainingLedgerTest, ASlowRunTakesLongerAndItsCheckpointKeepsItsWork) {
  TrainingLedger l(10 * kHour, kHour);
  l.Start(0, 0, DownCause::kRecovery);
  l.SetSpeed(30 * kMinute, 500);  // half speed from 30 minutes on
  EXPECT_EQ(l.RunProgress(90 * kMinute), 60 * kMinute);
  EXPECT_EQ(l.DoneAt(), 30 * kMinute + 2 * (9 * kHour + 30 * kMinute));
  const Time ckpt = l.NextCheckpointAfter(40 * kMinute);
  EXPECT_EQ(ckpt, 90 * kMinute);
  l.Interrupt(ckpt);  // swapped at that checkpoint: nothing lost
  EXPECT_EQ(l.kept(), kHour);
  EXPECT_EQ(l.lost_work(), 0);
  EXPECT_EQ(l.slowdown(), 30 * kMinute);
  ExpectBalanced(l, ckpt);
  l.Start(ckpt, 0, DownCause::kRecovery);
  EXPECT_EQ(l.DoneAt(), ckpt + 9 * kHour);  // full speed again
}

}  // namespace
}  // namespace hangar::sim
