// Progress the tasks report (`hangar progress`), and what the controller does with it: hung jobs
// are restarted, failed or noted as their spec says; stragglers are named with their node
// (progress_book.h has the rules; docs/progress.md).
#include <algorithm>
#include <cstdio>

#include "controller/state/cluster_state.h"
#include "controller/state/job_lifecycle.h"

namespace hangar::controller {

using job::JobState;

namespace {

std::string Seconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(us) / 1e6);
  return buf;
}

std::string Factor(int64_t milli) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", static_cast<double>(milli) / 1000);
  return buf;
}

// The telemetry of rank `slow`'s GPUs (task `slow` of `a`) beside the rest of its gang's: an SM
// clock, a PCIe link or a temperature that sets them apart, in words; or that nothing does (then
// the cause is outside its GPUs: its CPU, network or data). Empty when no GPU reported yet.
std::string TelemetryEvidence(const cluster::Topology& topo, const NodeTable& nodes,
                              const cluster::GangAssignment& a, size_t slow) {
  struct Seen {
    std::string where;
    const GpuTelemetry* t;
  };
  std::vector<Seen> mine, others;
  for (size_t k = 0; k < a.tasks.size(); ++k) {
    for (const cluster::GpuGrant& g : a.GrantsOf(a.tasks[k])) {
      const cluster::GpuInfo& info = topo.gpus()[g.gpu];
      const NodeRecord& r = nodes[info.node];
      if (info.index >= r.gpus.size() || r.gpus[info.index].sm_clock_mhz == 0) continue;
      (k == slow ? mine : others)
          .push_back({"GPU " + std::to_string(info.index) + " of " + topo.nodes()[info.node].name,
                      &r.gpus[info.index]});
    }
  }
  if (mine.empty() || others.empty()) return "";
  auto median = [&](uint32_t GpuTelemetry::*field) {
    std::vector<uint32_t> v;
    for (const Seen& s : others) v.push_back(s.t->*field);
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const uint32_t clock = median(&GpuTelemetry::sm_clock_mhz);
  const uint32_t temp = median(&GpuTelemetry::temperature_c);
  const uint32_t link = median(&GpuTelemetry::pcie_gen) * 100 + median(&GpuTelemetry::pcie_width);
  std::vector<std::string> found;
  for (const Seen& s : mine) {
    if (s.t->sm_clock_mhz * 10 < clock * 9) {
      found.push_back(s.where + " runs at " + std::to_string(s.t->sm_clock_mhz) + " MHz against " +
                      std::to_string(clock) + " MHz on the gang's others");
    }
    if (s.t->pcie_gen && s.t->pcie_gen * 100 + s.t->pcie_width < link) {
      found.push_back(s.where + " is on a PCIe gen" + std::to_string(s.t->pcie_gen) + " x" +
                      std::to_string(s.t->pcie_width) + " link against gen" +
                      std::to_string(link / 100) + " x" + std::to_string(link % 100));
    }
    if (s.t->temperature_c >= temp + 15) {
      found.push_back(s.where + " is at " + std::to_string(s.t->temperature_c) + " C against " +
                      std::to_string(temp) + " C");
    }
  }
  if (found.empty()) {
    return "its GPUs' clocks, PCIe links and temperatures match the gang's others (look outside "
           "the GPU: its CPU, network or data)";
  }
  std::string out;
  for (size_t i = 0; i < found.size() && i < 3; ++i) out += (i ? "; " : "") + found[i];
  return out;
}

// The open InfiniBand findings of a node (the health rules on its ports' state and error
// counters: a port down, symbol errors, link recoveries), in words; empty when it has none.
std::string InfiniBandEvidence(const health::NodeReport& report) {
  std::string out;
  for (const auto& c : report.conditions) {
    if (c.type.rfind("ib_", 0) == 0) out += (out.empty() ? "" : "; ") + c.reason;
  }
  return out;
}

// "rank 1 on node-2 (step 10) reported no progress for 12s" and the like, for events and messages.
std::string HangText(const ProgressBook::Hang& h, Duration timeout) {
  if (h.ranks.empty()) {
    return "hung: no rank reported progress in the " + FormatDuration(h.silent_for) +
           " since the attempt started (hang_timeout " + FormatDuration(timeout) + ")";
  }
  std::string text = "hung: ";
  for (size_t i = 0; i < h.ranks.size(); ++i) {
    const auto& r = h.ranks[i];
    if (i == 3) {
      text += " and " + std::to_string(h.ranks.size() - 3) + " more";
      break;
    }
    text += (i ? ", " : std::string(h.ranks.size() == 1 ? "rank " : "ranks ")) +
            std::to_string(r.rank) + " on " + r.node + " (step " + std::to_string(r.step) + ")";
  }
  return text + " reported no progress for " + FormatDuration(h.silent_for) + " (hang_timeout " +
         FormatDuration(timeout) + "; the furthest rank is at step " + std::to_string(h.last_step) +
         ")";
}

}  // namespace

Status ClusterState::OnProgress(const std::string& node, const pb::Progress& p, Time now,
                                Effects* fx) {
  // Only the node that runs the task may speak for it.
  HANGAR_RETURN_IF_ERROR(CheckTaskOwner(node, p.task_id()));
  sched::JobId id;
  uint32_t attempt, index;
  if (!ParseTaskId(p.task_id(), &id, &attempt, &index)) return Status::Ok();
  auto it = jobs_.records().find(id);
  if (it == jobs_.records().end() || it->second.attempt != attempt ||
      index >= it->second.tasks.size())
    return Status::Ok();
  JobRecord& j = it->second;
  jobs_.TouchView(j.id);
  const job::ProgressSpec& spec = j.spec->spec.progress;
  auto straggler = progress_.Record(id, attempt, index, node, p.step(),
                                    static_cast<int64_t>(p.step_time_us()), now, spec);
  // The attempt's first report starts its productive time (goodput_ledger.h): stored with the job.
  if (goodput_.Progress(id, attempt, p.step(), static_cast<int64_t>(p.step_time_us()), now))
    Persist(j, fx);
  if (straggler) {
    const std::string telemetry =
        TelemetryEvidence(*topology_, nodes_, j.assignment, straggler->rank);
    const std::string fabric =
        straggler->rank < j.tasks.size()
            ? InfiniBandEvidence(health_.Report(j.tasks[straggler->rank].node))
            : std::string();
    const std::string why = "straggler: rank " + std::to_string(straggler->rank) + " on node " +
                            straggler->node + " takes " + Seconds(straggler->step_time_us) +
                            " a step, against the gang's median " + Seconds(straggler->median_us) +
                            " (over " + Factor(spec.straggler_factor_milli) + " for " +
                            std::to_string(spec.straggler_reports) + " reports in a row)" +
                            (telemetry.empty() ? "" : "; telemetry: " + telemetry) +
                            (fabric.empty() ? "" : "; its node's fabric: " + fabric);
    fx->Event(now, "job", "job/" + std::to_string(id), why);
    fx->Event(now, "node", "node/" + straggler->node,
              "suspect: " + why + " in job " + std::to_string(id));
  }
  // While the rank stays slow its node stays suspect in the health engine (ranked last for new
  // gangs), and for a while after.
  if (!straggler) straggler = progress_.StillStraggling(id, index, spec);
  if (straggler) {
    const std::string evidence = "rank " + std::to_string(straggler->rank) + " of job " +
                                 std::to_string(id) + " takes " + Seconds(straggler->step_time_us) +
                                 " a step, against its gang's median " +
                                 Seconds(straggler->median_us);
    if (health_.ObserveStraggler(j.tasks[index].node, {now, evidence}).ok()) health_pass_.Touch();
  }
  return Status::Ok();
}

void ClusterState::CheckProgress(Time now, Effects* fx) {
  if (!progress_.CheckDue(now)) return;
  for (sched::JobId id : progress_.Jobs()) {
    auto it = jobs_.records().find(id);
    // A finished job's reports stay an hour, for `hangar job` and `explain` on how it ended.
    if (it == jobs_.records().end() ||
        (job::IsFinal(it->second.state) && now - it->second.ended > kHour)) {
      progress_.Forget(id);
      jobs_.TouchView(id);  // its progress leaves its view
    }
  }
  std::vector<std::pair<sched::JobId, ProgressBook::Hang>> hung;
  for (sched::JobId id : jobs_.active()) {
    const JobRecord& j = jobs_.at(id);
    const Duration timeout = j.spec->spec.progress.hang_timeout;
    if (timeout <= 0 || j.state != JobState::kRunning || !j.started) continue;
    std::vector<uint32_t> live;
    for (const auto& t : j.tasks) {
      if (t.phase == TaskRun::Phase::kRunning) live.push_back(t.index);
    }
    // After a restart of the controller, reports start again only once agents are back.
    const Time since = std::max(j.started, nodes_.hearing().restored_at());
    if (auto h = progress_.CheckHang(id, j.attempt, since, timeout, live, now))
      hung.emplace_back(id, std::move(*h));
  }
  for (const auto& [id, h] : hung) {
    jobs_.TouchView(id);  // its view shows when it hung
    ActOnHang(jobs_.at(id), h, now, fx);
  }
}

void ClusterState::ActOnHang(JobRecord& j, const ProgressBook::Hang& h, Time now, Effects* fx) {
  const job::ProgressSpec& spec = j.spec->spec.progress;
  const std::string why = HangText(h, spec.hang_timeout);
  progress_.DescribeHang(j.id, why);
  const std::string subject = "job/" + std::to_string(j.id);
  switch (spec.on_hang) {
    case job::HangAction::kNotify:
      fx->Event(now, "job", subject, why + "; on_hang: notify, so it runs on");
      return;
    case job::HangAction::kRestart:
      fx->Event(now, "job", subject, why + "; on_hang: restart");
      Requeue(j, why + "; restarted (the checkpoint signal first)", now,
              fx);  // with the checkpoint signal
      return;
    case job::HangAction::kFail:
      fx->Event(now, "job", subject, why + "; on_hang: fail");
      FailHung(j, why, now, fx);
      return;
  }
}

void ClusterState::FailHung(JobRecord& j, const std::string& why, Time now, Effects* fx) {
  // As a time limit's end; its GPUs stay held until its tasks have ended.
  StopWithCheckpointSignal(j, fx);
  CloseAttempt(j, now, 0, "failed", fx);
  jobs_.Move(j, JobState::kFailed, "hung");
  j.ended = now;
  j.message = why;
  fx->Event(now, "job", "job/" + std::to_string(j.id), "failed: " + why);
  Persist(j, fx);
  dirty_ = true;
}

}  // namespace hangar::controller
