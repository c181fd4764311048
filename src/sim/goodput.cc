#include "sim/goodput.h"

#include <algorithm>

namespace hangar::sim {

double BoundEttr(double interruptions_per_hour, Duration checkpoint_interval, Duration restore) {
  const double cost_hours =
      (static_cast<double>(checkpoint_interval) / 2 + static_cast<double>(restore)) / kHour;
  return std::max(0.0, 1.0 - interruptions_per_hour * cost_hours);
}

std::string_view DownCauseName(DownCause c) {
  switch (c) {
    case DownCause::kRecovery:
      return "recovery";
    case DownCause::kWaitForNode:
      return "wait_for_node";
    case DownCause::kQueue:
      return "queue";
  }
  return "unknown";
}

TrainingLedger::TrainingLedger(Duration work, Duration checkpoint_interval)
    : work_(work), checkpoint_(std::max<Duration>(checkpoint_interval, 1)) {}

void TrainingLedger::Start(Time at, Duration restore, DownCause why) {
  if (first_start_ == kNever) {
    first_start_ = at;
  } else {
    down_[static_cast<size_t>(why)] += at - stopped_at_;
  }
  last_why_ = why;
  running_ = true;
  run_start_ = speed_since_ = at;
  progress_from_ = at + restore;
  progress_base_ = 0;
  speed_ = 1000;
}

Duration TrainingLedger::RunProgress(Time t) const {
  if (!running_) return 0;
  const Time from = std::max(speed_since_, progress_from_);
  return progress_base_ + std::max<Duration>(0, t - from) * speed_ / 1000;
}

void TrainingLedger::SetSpeed(Time now, int32_t permille) {
  if (!running_) return;
  progress_base_ = RunProgress(now);
  speed_since_ = std::max(now, speed_since_);
  speed_ = std::clamp<int32_t>(permille, 1, 1000);
}

namespace {
Duration CeilDiv(Duration a, Duration b) { return (a + b - 1) / b; }
}  // namespace

Time TrainingLedger::DoneAt() const {
  if (!running_) return kNever;
  const Duration need = std::max<Duration>(0, work_ - kept_ - progress_base_);
  return std::max(speed_since_, progress_from_) + CeilDiv(need * 1000, speed_);
}

Time TrainingLedger::NextCheckpointAfter(Time t) const {
  if (!running_) return kNever;
  const Duration next = (RunProgress(t) / checkpoint_ + 1) * checkpoint_;
  if (kept_ + next >= work_) return DoneAt();
  return std::max(speed_since_, progress_from_) + CeilDiv((next - progress_base_) * 1000, speed_);
}

void TrainingLedger::CloseRun(Time now) {
  restore_ += std::max<Duration>(0, std::min(now, progress_from_) - run_start_);
  if (now > progress_from_)
    slowdown_ += std::max<Duration>(0, (now - progress_from_) - RunProgress(now));
}

void TrainingLedger::Interrupt(Time now) {
  if (!running_) return;
  if (now < run_start_) {
    // Stopped again before the planned start: the down time booked up to that start was not.
    down_[static_cast<size_t>(last_why_)] -= run_start_ - now;
  }
  const Duration p = RunProgress(now);
  const Duration checkpointed = p / checkpoint_ * checkpoint_;
  kept_ = std::min(work_, kept_ + checkpointed);
  lost_work_ += p - checkpointed;
  CloseRun(now);
  running_ = false;
  stopped_at_ = now;
  ++interruptions_;
}

void TrainingLedger::Finish(Time now) {
  if (!running_) return;
  CloseRun(now);
  kept_ = work_;
  running_ = false;
  stopped_at_ = now;
}

double TrainingLedger::Ettr(Time now) const {
  if (first_start_ == kNever || now <= first_start_) return 0;
  return static_cast<double>(kept_) / static_cast<double>(now - first_start_);
}

}  // namespace hangar::sim
