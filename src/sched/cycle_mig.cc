// The cycle's last stage: MIG reshapes for the MIG jobs it could not place (sched/mig_reshape.h).
#include <vector>

#include "sched/cycle.h"
#include "sched/mig_reshape.h"

namespace hangar::sched {

namespace {

bool WantsMig(const GangRequest& r) {
  for (const GroupRequest& g : r.groups) {
    if (g.shape.kind == job::GpuKind::kMig) return true;
  }
  return false;
}

// Reasons that a new instance would not change: the job waits for its quota, behind another
// job, or can never run here.
bool ReshapeCannotHelp(const Reason& r) {
  return r.IsNever() || r.rule == Rule::kNotNowQuota || r.rule == Rule::kNotNowBlocked ||
         r.rule == Rule::kNotNowReserved || r.rule == Rule::kNotNowWindow ||
         r.rule == Rule::kNotNowWindowClosed;
}

}  // namespace

void Scheduler::Run::PlanReshapes() {
  if (!c_.topo.has_mig()) return;  // no GPU to re-cut
  const MigReshapeLimits limits;
  std::vector<uint8_t> skip(c_.snap.pending.size(), 0);
  for (const Placement& p : out_.placements) skip[p.pending_index] = 1;
  for (const Verdict& v : out_.waiting) {
    if (ReshapeCannotHelp(v.reason)) skip[v.pending_index] = 1;
  }
  std::vector<uint32_t> wanting;
  for (uint32_t idx : c_.order) {
    if (skip[idx] || !WantsMig(*c_.snap.pending[idx].request)) continue;
    wanting.push_back(idx);
    if (static_cast<int>(wanting.size()) >= limits.max_jobs) break;
  }
  if (!wanting.empty()) PlanMigReshapes(c_.work, c_.snap, wanting, limits, &out_.mig_reshapes);
}

}  // namespace hangar::sched
