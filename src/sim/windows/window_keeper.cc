#include "sim/windows/window_keeper.h"

#include <algorithm>

namespace hangar::sim {

std::string_view WindowNoticeName(WindowNotice n) {
  switch (n) {
    case WindowNotice::kNone:
      return "none";
    case WindowNotice::kBooked:
      return "booked";
    case WindowNotice::kUnannounced:
      return "unannounced";
  }
  return "";
}

WindowKeeper::WindowKeeper(WindowKeeperConfig config, const cluster::Topology& topology)
    : config_(std::move(config)), topology_(&topology) {
  const size_t n = config_.windows.size();
  booked_.assign(n, 0);
  opened_.assign(n, 0);
  closed_.assign(n, 0);
  ledgers_.assign(n, {});
}

Time WindowKeeper::BookedAt(size_t w) const {
  return std::max(config_.windows[w].start - config_.book_ahead, config_.not_before);
}

Time WindowKeeper::BackAt(size_t w) const {
  const SimReservation& r = config_.windows[w];
  return r.maintenance ? r.end + config_.validation : r.end;
}

Time WindowKeeper::NextEvent() const {
  Time t = kNever;
  for (size_t w = 0; w < config_.windows.size(); ++w) {
    const SimReservation& r = config_.windows[w];
    // The book-ahead span opens too: the idle count starts there.
    for (Time e : {BookedAt(w), r.start, BackAt(w)}) {
      if ((last_ == kNever || e > last_) && e < t) t = e;
    }
  }
  return t;
}

void WindowKeeper::AccountIdle(Time from, Time to, const SimControl& sim) {
  for (size_t w = 0; w < config_.windows.size(); ++w) {
    const SimReservation& r = config_.windows[w];
    const Time a = std::max(from, BookedAt(w)), b = std::min(to, r.start);
    const Time da = std::max(from, r.start), db = std::min(to, BackAt(w));
    int64_t free_milli = 0, all_milli = 0;
    for (uint32_t n : r.nodes) {
      free_milli += sim.usage().node(n).free_milli;
      all_milli += int64_t{topology_->nodes()[n].num_gpus} * cluster::kMilliPerGpu;
    }
    if (b > a) ledgers_[w].idle_gpu_s_before += static_cast<double>(free_milli) * (b - a) / 1e6;
    if (db > da && opened_[w] && r.maintenance && config_.notice != WindowNotice::kNone)
      ledgers_[w].out_gpu_s += static_cast<double>(all_milli) * (db - da) / 1e6;
  }
}

void WindowKeeper::Open(Time now, size_t w, SimControl& sim) {
  opened_[w] = 1;
  const SimReservation& r = config_.windows[w];
  if (config_.notice == WindowNotice::kNone || !r.maintenance) return;
  std::vector<size_t> jobs;
  for (uint32_t n : r.nodes) {
    for (size_t j : sim.JobsOn(n)) jobs.push_back(j);
  }
  std::sort(jobs.begin(), jobs.end());
  jobs.erase(std::unique(jobs.begin(), jobs.end()), jobs.end());
  for (size_t j : jobs) {
    const cluster::GangAssignment* a = sim.AssignmentOf(j);
    const Time end = sim.RunEnd(j);
    if (!a || end == kNever) continue;
    Duration lost = 0;
    if (config_.notice == WindowNotice::kUnannounced) {
      lost = (now - sim.RunStart(j)) % std::max<Duration>(config_.checkpoint_interval, 1);
      ledgers_[w].lost_gpu_s += static_cast<double>(a->TotalMilliGpu(*topology_)) * lost / 1e6;
    }
    ledgers_[w].requeued++;
    sim.Requeue(now, j, (end - now) + lost + config_.restore, /*to_back=*/false);
  }
  cluster::NodeCondition drained;
  drained.schedulable = false;
  for (uint32_t n : r.nodes) sim.SetNodeCondition(n, drained);
}

void WindowKeeper::Close(size_t w, SimControl& sim) {
  closed_[w] = 1;
  const SimReservation& r = config_.windows[w];
  if (config_.notice == WindowNotice::kNone || !r.maintenance) return;
  for (uint32_t n : r.nodes) sim.SetNodeCondition(n, {});
}

void WindowKeeper::Act(Time now, SimControl& sim) {
  if (last_ != kNever) AccountIdle(last_, now, sim);
  last_ = now;
  bool rebook = false;
  for (size_t w = 0; w < config_.windows.size(); ++w) {
    const SimReservation& r = config_.windows[w];
    if (!booked_[w] && config_.notice == WindowNotice::kBooked && now >= BookedAt(w)) {
      booked_[w] = 1;
      rebook = true;
    }
    if (!opened_[w] && now >= r.start) Open(now, w, sim);
    if (!closed_[w] && now >= BackAt(w)) Close(w, sim);
  }
  if (!rebook) return;
  std::vector<sched::NodeWindow> windows;
  for (size_t w = 0; w < config_.windows.size(); ++w) {
    if (!booked_[w]) continue;
    const SimReservation& r = config_.windows[w];
    windows.push_back({r.name, r.start, r.end, r.nodes});
  }
  sim.SetWindows(std::move(windows));
}

}  // namespace hangar::sim
