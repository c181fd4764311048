// Goodput accounting for one training job: the effective training time ratio (ETTR) and where
// the rest of the wall time went. Progress is measured in time at full speed; the job writes a
// checkpoint every `checkpoint_interval` of progress within a run, and an interruption loses the
// progress since the last one. Checkpoints are taken as free (asynchronous).
//
//   ETTR = kept progress / (now - first start)
//   wall time = kept + lost work + restore + slowdown + down (not running: detection,
//               replacement, waiting for a node, waiting in the queue)
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/time.h"

namespace hangar::sim {

// The ETTR the job reaches when every interruption costs exactly half a checkpoint interval of
// lost work plus its restore, with a replacement there at once:
//   bound = 1 - lambda * (checkpoint_interval / 2 + restore)
// with lambda the job's interruptions per unit of wall time (its GPUs times the per-GPU rate).
// 0 when the losses would exceed the wall time.
double BoundEttr(double interruptions_per_hour, Duration checkpoint_interval, Duration restore);

// Why the job was not running (TrainingLedger::Start).
enum class DownCause : uint8_t {
  kRecovery,     // detection, taking a replacement, launching again
  kWaitForNode,  // holding its healthy nodes until a node is free
  kQueue,        // back in the queue, holding nothing
};
inline constexpr int kDownCauses = 3;
std::string_view DownCauseName(DownCause c);  // "recovery", "wait_for_node", "queue"

class TrainingLedger {
 public:
  TrainingLedger(Duration work, Duration checkpoint_interval);

  // A run starts at `at`; it restores for `restore` before it makes progress (the very first run
  // has nothing to restore). The time since the last interruption counts as down for `why`.
  void Start(Time at, Duration restore, DownCause why);
  // From `now` the run progresses at `permille` of full speed (a slow GPU); 1000 again after.
  void SetSpeed(Time now, int32_t permille);
  // The run stops at `now`: progress since its last checkpoint is lost.
  void Interrupt(Time now);

  bool running() const { return running_; }
  bool done() const { return kept_ >= work_; }
  // When the work is done if nothing else happens (kNever when not running).
  Time DoneAt() const;
  // The first checkpoint strictly after `t` (or DoneAt, if sooner); kNever when not running.
  Time NextCheckpointAfter(Time t) const;
  // Progress made in the current run by `t` (0 before its restore ends).
  Duration RunProgress(Time t) const;
  // Marks the work done at `now` (call at DoneAt).
  void Finish(Time now);

  Time first_start() const { return first_start_; }
  Duration work() const { return work_; }
  Duration kept() const { return kept_; }
  Duration lost_work() const { return lost_work_; }
  Duration restore() const { return restore_; }
  Duration slowdown() const { return slowdown_; }
  Duration down(DownCause c) const { return down_[static_cast<size_t>(c)]; }
  int interruptions() const { return interruptions_; }
  // kept progress / (now - first start); 0 before the first start.
  double Ettr(Time now) const;

 private:
  Duration work_, checkpoint_;
  Time first_start_ = kNever;
  bool running_ = false;
  Time stopped_at_ = kNever;
  // The current run: progress begins at progress_from_; progress_base_ was made by speed_since_,
  // and it goes on at speed_ per mille.
  Time run_start_ = 0, progress_from_ = 0, speed_since_ = 0;
  Duration progress_base_ = 0;
  DownCause last_why_ = DownCause::kRecovery;
  int32_t speed_ = 1000;
  Duration kept_ = 0, lost_work_ = 0, restore_ = 0, slowdown_ = 0;
  std::array<Duration, kDownCauses> down_{};
  int interruptions_ = 0;

  void CloseRun(Time now);  // books the run's restore and slowdown up to `now`
};

}  // namespace hangar::sim
