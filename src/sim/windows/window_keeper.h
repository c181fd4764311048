// Reservations and maintenance windows inside a simulation (docs/sim-windows.md): a Disruptor
// that does what the controller does with its reservation book, in one of three ways, so that a
// window's cost can be measured before it is booked:
//  - kNone: no window at all (the baseline; it only measures);
//  - kBooked: each window is booked `book_ahead` before its start and from then on every cycle
//    sees it (Snapshot::windows): no job starts on its nodes if its time limit would cross the
//    start. At the start, a maintenance window's jobs still running on its nodes are checkpointed
//    and requeued (no work lost; they pay the restore) and its nodes drain until the end;
//  - kUnannounced: nothing is booked; at the start the same nodes drain without notice, and the
//    jobs on them are killed and requeued, losing the work since their last checkpoint.
// A reservation that is not a maintenance window only keeps others off its nodes (kBooked);
// trace jobs never run inside one.
//
// It books, in every mode: the GPU-hours idle on each window's nodes over [start - book_ahead,
// start), the jobs requeued at its start and the GPU-hours of work they lost. A maintenance
// window's nodes come back `validation` after its end (validated before they take work).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cluster/topology.h"
#include "sim/engine/disruption.h"
#include "sim/windows/window_file.h"

namespace hangar::sim {

enum class WindowNotice : uint8_t { kNone, kBooked, kUnannounced };
std::string_view WindowNoticeName(WindowNotice n);  // "none", "booked", "unannounced"

struct WindowKeeperConfig {
  WindowNotice notice = WindowNotice::kBooked;
  std::vector<SimReservation> windows;
  Duration book_ahead = kDay;
  // kUnannounced: jobs checkpoint this often from their start; a killed job loses the rest.
  Duration checkpoint_interval = kHour;
  Duration restore = 30 * kSecond;  // what a requeued job pays on its next start
  // After a maintenance window ends, its nodes are validated this long before they take work
  // again (the controller validates a node back from a drain; docs/health.md): out of service
  // from the window's start to its end plus this, in both ways a window is taken.
  Duration validation = 0;
  // The simulation's start: a window is booked (and its idle counted) from here at the earliest.
  Time not_before = 0;
};

struct WindowLedger {
  double idle_gpu_s_before = 0;  // free GPU-seconds on its nodes in the book-ahead span
  double out_gpu_s = 0;          // its nodes' GPU-seconds drained (maintenance), validation too
  int64_t requeued = 0;          // jobs stopped on its nodes at its start
  double lost_gpu_s = 0;         // their work since their last checkpoint (kUnannounced)
};

class WindowKeeper : public Disruptor {
 public:
  WindowKeeper(WindowKeeperConfig config, const cluster::Topology& topology);

  Time NextEvent() const override;
  void Act(Time now, SimControl& sim) override;

  // By window, in the order given.
  const std::vector<WindowLedger>& ledgers() const { return ledgers_; }

 private:
  void AccountIdle(Time from, Time to, const SimControl& sim);
  void Open(Time now, size_t w, SimControl& sim);
  void Close(size_t w, SimControl& sim);
  Time BookedAt(size_t w) const;  // when window w is booked, and its idle count begins
  Time BackAt(size_t w) const;    // when window w's nodes take work again (after validation)

  WindowKeeperConfig config_;
  const cluster::Topology* topology_;
  std::vector<uint8_t> booked_, opened_, closed_;
  std::vector<WindowLedger> ledgers_;
  Time last_ = kNever;  // the last instant acted at (kNever: none yet)
};

}  // namespace hangar::sim
