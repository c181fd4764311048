#include "controller/state/goodput_ledger.h"

#include <algorithm>

namespace hangar::controller {

namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

}  // namespace

std::string_view GoodputLedger::PartName(Part p) {
  static constexpr std::string_view kNames[] = {"productive", "setup", "restart", "lost_work",
                                                "requeue_wait"};
  return kNames[p];
}

// The words come from the controller's own requeues (health drains, lost nodes, hangs,
// preemptions, maintenance windows, idle reclamation, `hangar requeue`).
std::string GoodputLedger::InterruptionCause(std::string_view why) {
  if (why.rfind("hung:", 0) == 0) return "hang";
  if (why.rfind("straggler:", 0) == 0) return "straggler";
  if (why.rfind("preempted for job", 0) == 0) return "preemption";
  if (why.rfind("maintenance window", 0) == 0) return "maintenance";
  if (why.rfind("reclaimed:", 0) == 0) return "idle_reclaim";
  if (why.rfind("requeued by", 0) == 0) return "user";
  if (Contains(why, "agent exited")) return "agent_exit";
  if (why.rfind("node ", 0) == 0 && Contains(why, " lost (")) return "node_lost";
  if (Contains(why, " draining")) return "health";
  if (Contains(why, " failed the gang preflight")) return "health";  // a node found bad
  return "other";
}

void GoodputLedger::Split::Add(Part p, Duration d, int64_t milli_gpu) {
  ms[p] += d;
  gpu_ms[p] += d * milli_gpu / 1000;
}

void GoodputLedger::Split::Add(const Split& o, int sign) {
  for (int p = 0; p < kParts; ++p) {
    ms[p] += sign * o.ms[p];
    gpu_ms[p] += sign * o.gpu_ms[p];
  }
}

Duration GoodputLedger::Split::wall() const {
  Duration w = 0;
  for (Duration d : ms) w += d;
  return w;
}

int64_t GoodputLedger::Split::gpu_wall() const {
  int64_t w = 0;
  for (int64_t d : gpu_ms) w += d;
  return w;
}

void GoodputLedger::CauseCost::Add(const CauseCost& o, int sign) {
  count += sign * o.count;
  lost += sign * o.lost;
  restart += sign * o.restart;
  wait += sign * o.wait;
  gpu_ms += sign * o.gpu_ms;
}

Time GoodputLedger::Attempt::ProductiveFrom() const {
  return expects_progress ? first_progress : running;
}

void GoodputLedger::Placed(JobId job, uint32_t attempt, int64_t milli_gpu, bool expects_progress,
                           Time now) {
  Job& j = jobs_[job];
  if (j.ended >= 0) return;                      // an ended job is not placed again
  if (j.open) CloseAttempt(j, "requeued", now);  // never told of its end: an interruption
  if (j.first_start < 0) {
    j.first_start = now;
    under_way_.insert(job);
  }
  if (j.waiting_since >= 0) {
    ChargeLast(j, kRequeueWait, std::max<Duration>(0, now - j.waiting_since));
    j.waiting_since = -1;
  }
  j.current = Attempt{};
  j.current.attempt = attempt;
  j.current.milli_gpu = milli_gpu;
  j.current.expects_progress = expects_progress;
  j.current.placed = now;
  j.open = true;
}

GoodputLedger::Job* GoodputLedger::Open(JobId job, uint32_t attempt) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.open || it->second.current.attempt != attempt)
    return nullptr;
  return &it->second;
}

void GoodputLedger::Running(JobId job, uint32_t attempt, Time now) {
  Job* j = Open(job, attempt);
  if (j && j->current.running < 0) j->current.running = now;
}

bool GoodputLedger::Progress(JobId job, uint32_t attempt, uint64_t step, int64_t step_time_us,
                             Time now) {
  Job* j = Open(job, attempt);
  if (!j) return false;
  Attempt& a = j->current;
  a.last_step = std::max(a.last_step, step);
  a.last_progress = now;
  if (step_time_us > 0) a.step_time_us = step_time_us;
  if (a.first_progress >= 0) return false;
  // A job that reports progress is productive from its first report, whatever its spec says.
  a.first_progress = now;
  a.first_step = step;
  a.expects_progress = true;
  if (j->interruptions.empty()) return true;
  Interruption& i = j->interruptions.back();
  if (i.attempt + 1 != attempt || i.last_step == 0 || i.productive_from < 0) return true;
  // The step this attempt resumed from says how much of the last attempt's work was kept: the
  // steps between it and the furthest reached are redone, and the time since the last report
  // (a hang's silence, the stop) produced nothing either.
  double per_step_ms = static_cast<double>(i.step_time_us) / 1000.0;
  if (per_step_ms <= 0 && i.last_step > i.first_step && i.last_progress > i.productive_from) {
    per_step_ms = static_cast<double>(i.last_progress - i.productive_from) /
                  static_cast<double>(i.last_step - i.first_step);
  }
  if (per_step_ms <= 0) return true;
  const uint64_t resumed = step > 0 ? step - 1 : 0;
  const uint64_t redone = i.last_step > resumed ? i.last_step - resumed : 0;
  const Duration run = i.at - i.productive_from;
  const Duration lost =
      std::clamp<Duration>(std::max<Duration>(0, i.at - i.last_progress) +
                               static_cast<Duration>(per_step_ms * static_cast<double>(redone)),
                           0, run);
  ReviseLost(*j, i, lost, "steps");
  return true;
}

void GoodputLedger::Checkpoint(JobId job, uint32_t attempt, Time now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Job& j = it->second;
  if (j.open && j.current.attempt == attempt) {
    j.current.last_checkpoint = now;
    return;
  }
  // A checkpoint of the attempt just interrupted, written while its tasks stopped: it kept the
  // progress they had made; only the time since their last report (if any) is lost.
  if (j.waiting_since < 0 || j.interruptions.empty()) return;
  Interruption& i = j.interruptions.back();
  if (i.attempt != attempt || i.lost_basis == "steps" || i.productive_from < 0) return;
  const Duration silent = i.last_progress >= 0 ? std::max<Duration>(0, i.at - i.last_progress) : 0;
  ReviseLost(j, i, std::min(silent, i.at - i.productive_from), "checkpoint");
}

void GoodputLedger::WillRequeue(JobId job, std::string why) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) it->second.pending_cause = std::move(why);
}

void GoodputLedger::Ended(JobId job, uint32_t attempt, const std::string& how, Time now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Job& j = it->second;
  if (j.ended >= 0) return;
  if (j.open && j.current.attempt == attempt) CloseAttempt(j, how, now);
  if (how == "requeued") return;
  if (j.waiting_since >= 0) {  // ended while it waited to be placed again
    ChargeLast(j, kRequeueWait, std::max<Duration>(0, now - j.waiting_since));
    j.waiting_since = -1;
  }
  j.open = false;
  j.ended = now;
  under_way_.erase(job);
  Tally(j, 1);
}

void GoodputLedger::CloseAttempt(Job& j, const std::string& how, Time now) {
  const Attempt& a = j.current;
  const Time from = a.ProductiveFrom();
  const Duration overhead = std::max<Duration>(0, (from >= 0 ? from : now) - a.placed);
  if (j.interruptions.empty()) {
    j.closed.Add(kSetup, overhead, a.milli_gpu);
  } else {
    ChargeLast(j, kRestart, overhead);
  }
  const Duration run = from >= 0 ? std::max<Duration>(0, now - from) : 0;
  j.open = false;
  if (how != "requeued") {
    j.closed.Add(kProductive, run, a.milli_gpu);
    return;
  }
  Interruption i;
  i.attempt = a.attempt;
  i.at = now;
  i.why = std::move(j.pending_cause);
  j.pending_cause.clear();
  i.cause = InterruptionCause(i.why);
  i.milli_gpu = a.milli_gpu;
  i.productive_from = from;
  i.last_progress = a.last_progress;
  i.first_step = a.first_step;
  i.last_step = a.last_step;
  i.step_time_us = a.step_time_us;
  // As far as anyone knows now: the work since the attempt's last checkpoint (all of it without
  // one). A checkpoint written while it stops, or the next attempt's first step, revises it.
  if (from >= 0 && a.last_checkpoint >= from) {
    i.lost = now - a.last_checkpoint;
    i.lost_basis = "checkpoint";
  } else {
    i.lost = run;
    i.lost_basis = "runtime";
  }
  j.closed.Add(kProductive, run - i.lost, a.milli_gpu);
  j.closed.Add(kLostWork, i.lost, a.milli_gpu);
  CauseCost& c = j.by_cause[i.cause];
  c.count++;
  c.lost += i.lost;
  c.gpu_ms += i.lost * a.milli_gpu / 1000;
  j.interruptions.push_back(std::move(i));
  if (j.interruptions.size() > kMaxKept) j.interruptions.erase(j.interruptions.begin());
  j.waiting_since = now;
}

void GoodputLedger::ChargeLast(Job& j, Part part, Duration d) {
  Interruption& i = j.interruptions.back();
  const int64_t milli = part == kRequeueWait ? i.milli_gpu : j.current.milli_gpu;
  j.closed.Add(part, d, milli);
  CauseCost& c = j.by_cause[i.cause];
  (part == kRequeueWait ? i.wait : i.restart) += d;
  (part == kRequeueWait ? c.wait : c.restart) += d;
  c.gpu_ms += d * milli / 1000;
}

void GoodputLedger::ReviseLost(Job& j, Interruption& i, Duration lost, const char* basis) {
  const Duration delta = lost - i.lost;
  j.closed.Add(kLostWork, delta, i.milli_gpu);
  j.closed.Add(kProductive, -delta, i.milli_gpu);
  CauseCost& c = j.by_cause[i.cause];
  c.lost += delta;
  c.gpu_ms += delta * i.milli_gpu / 1000;
  i.lost = lost;
  i.lost_basis = basis;
}

void GoodputLedger::Tally(const Job& j, int sign) {
  ended_.Add(j.closed, sign);
  for (const auto& [cause, cost] : j.by_cause) ended_causes_[cause].Add(cost, sign);
  ended_jobs_ += sign;
  if (!j.by_cause.empty()) ended_interrupted_ += sign;
}

void GoodputLedger::Forget(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (it->second.ended >= 0) Tally(it->second, -1);
  under_way_.erase(job);
  jobs_.erase(it);
}

const GoodputLedger::Job* GoodputLedger::Find(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

GoodputLedger::Split GoodputLedger::SplitOf(const Job& j, Time now) const {
  Split s = j.closed;
  if (j.open) {
    const Attempt& a = j.current;
    const Time from = a.ProductiveFrom();
    const Time until = from >= 0 ? std::min(from, now) : now;
    s.Add(j.interruptions.empty() ? kSetup : kRestart, std::max<Duration>(0, until - a.placed),
          a.milli_gpu);
    if (from >= 0) s.Add(kProductive, std::max<Duration>(0, now - from), a.milli_gpu);
  }
  if (j.waiting_since >= 0 && !j.interruptions.empty()) {
    s.Add(kRequeueWait, std::max<Duration>(0, now - j.waiting_since),
          j.interruptions.back().milli_gpu);
  }
  return s;
}

}  // namespace hangar::controller
