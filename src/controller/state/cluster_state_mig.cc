// ClusterState: MIG layouts and queue-driven reshaping (docs/mig.md). Every MIG GPU's
// instances are what its agent last reported (Inventory at register, MigReshaped after a
// reshape); the scheduler places MIG tasks only into those. When a cycle plans a reshape
// (sched/mig_reshape.h) the controller takes the GPU's new layout at once, keeps the GPU out of
// use while the agent re-cuts it, and takes the layout the agent reports when it is done, whether
// it went or not. Nodes under cluster.yaml's mig.fixed_layouts are never re-cut.
#include <bit>

#include "controller/state/cluster_state.h"
#include "sched/mig_reshape.h"

namespace hangar::controller {

namespace {

// The shape of a reported instance, from its slices (names differ by part; slices do not).
std::optional<cluster::MigShape> ShapeOf(const pb::MigGpuInstance& mi) {
  for (int k = 0; k < cluster::kMigShapes; ++k) {
    const auto& info = cluster::ShapeInfo(static_cast<cluster::MigShape>(k));
    if (static_cast<uint32_t>(info.memory_slices) == mi.memory_slices() &&
        static_cast<uint32_t>(info.compute_slices) == mi.compute_slices()) {
      return static_cast<cluster::MigShape>(k);
    }
  }
  return std::nullopt;
}

void AddInstances(const cluster::MigLayout& l, uint8_t starts, uint8_t part,
                  google::protobuf::RepeatedPtrField<pb::MigGpuInstance>* out) {
  for (int s = 0; s < cluster::kMigMemorySlices; ++s) {
    if (!(starts >> s & 1)) continue;
    const auto shape = static_cast<cluster::MigShape>(l.shape_at[s]);
    const auto& info = cluster::ShapeInfo(shape);
    pb::MigGpuInstance* mi = out->Add();
    mi->set_start(static_cast<uint32_t>(s));
    mi->set_memory_slices(static_cast<uint32_t>(info.memory_slices));
    mi->set_compute_slices(static_cast<uint32_t>(info.compute_slices));
    mi->set_nvml_profile(info.nvml_profile);
    mi->set_profile(std::string(cluster::MigPartAt(part).profiles[static_cast<int>(shape)]));
  }
}

}  // namespace

cluster::MigLayout ClusterState::LayoutFromReport(
    uint32_t g, const google::protobuf::RepeatedPtrField<pb::MigGpuInstance>& instances,
    std::string* problems) const {
  cluster::MigLayout l;
  for (const auto& mi : instances) {
    auto shape = ShapeOf(mi);
    if (!shape || !l.Add(*shape, static_cast<int>(mi.start()))) {
      *problems += (problems->empty() ? "" : "; ") + std::string("GPU ") +
                   std::to_string(topology_->gpus()[g].index) + ": instance '" + mi.profile() +
                   "' at slice " + std::to_string(mi.start()) +
                   " is not a MIG placement this controller knows";
    }
  }
  return l;
}

void ClusterState::ApplyMigInventory(uint32_t n, const pb::Inventory& inv, Time now, Effects* fx) {
  const cluster::NodeInfo& node = topology_->nodes()[n];
  const bool fixed = options_.mig_fixed_layouts.count(n) > 0;
  std::string problems;
  for (int i = 0; i < inv.gpus_size() && i < node.num_gpus; ++i) {
    const uint32_t g = node.first_gpu + static_cast<uint32_t>(i);
    // Only a GPU its agent says is in MIG mode has instances to report; others (the simulator's
    // agents) keep making instances on demand.
    if (!topology_->gpus()[g].mig || !inv.gpus(i).mig()) continue;
    EndReshape(
        g);  // a reshape in flight when the agent went away: what it reports now is the truth
    alloc_.usage().SetMigLayout(g, LayoutFromReport(g, inv.gpus(i).mig_layout(), &problems), fixed);
  }
  if (!problems.empty()) fx->Event(now, "node", "node/" + node.name, "MIG layout: " + problems);
}

void ClusterState::EndReshape(uint32_t g) {
  alloc_.usage().SetMigReshaping(g, false);
  mig_reshapes_.ForgetGpu(g);
}

void ClusterState::SendMigReshapes(const std::vector<sched::MigReshapePlan>& plans, Time now,
                                   Effects* fx) {
  for (const sched::MigReshapePlan& plan : plans) {
    const cluster::GpuInfo& gi = topology_->gpus()[plan.gpu];
    const cluster::NodeInfo& node = topology_->nodes()[gi.node];
    if (!nodes_[gi.node].connected) continue;
    const uint64_t id = mig_reshapes_.Begin(plan.gpu, plan.for_job, now);
    pb::ControllerMessage m;
    pb::MigReshape* r = m.mutable_mig_reshape();
    r->set_id(id);
    r->set_gpu_index(gi.index);
    AddInstances(plan.before, sched::MigStartsToDestroy(plan.before, plan.after), gi.mig_part,
                 r->mutable_destroy());
    AddInstances(plan.after, sched::MigStartsToCreate(plan.before, plan.after), gi.mig_part,
                 r->mutable_create());
    fx->messages.push_back({node.name, std::move(m)});
    alloc_.usage().SetMigLayout(plan.gpu, plan.after);
    alloc_.usage().SetMigReshaping(plan.gpu, true);
    fx->Event(now, "node", "node/" + node.name,
              "MIG reshape of GPU " + std::to_string(gi.index) + " for job " +
                  std::to_string(plan.for_job) + ": " +
                  cluster::MigLayoutText(plan.before, gi.mig_part) + " -> " +
                  cluster::MigLayoutText(plan.after, gi.mig_part));
    if (auto j = jobs_.records().find(plan.for_job); j != jobs_.records().end()) {
      j->second.reason_detail =
          "waiting for a MIG reshape of GPU " + std::to_string(gi.index) + " on " + node.name;
    }
  }
}

void ClusterState::OnMigReshaped(const std::string& node, const pb::MigReshaped& r, Time now,
                                 Effects* fx) {
  const MigReshapeBook::InFlight* sent = mig_reshapes_.Find(r.id());
  if (!sent) return;  // superseded: the agent registered again since
  const uint32_t g = sent->gpu;
  const cluster::GpuInfo& gi = topology_->gpus()[g];
  if (topology_->nodes()[gi.node].name != node || gi.index != r.gpu_index())
    return;  // not that node's
  const Duration took = now - sent->sent;
  mig_reshapes_.Finish(r.id(), r.ok(), now);
  std::string problems;
  alloc_.usage().SetMigReshaping(g, false);
  alloc_.usage().SetMigLayout(g, LayoutFromReport(g, r.layout(), &problems));
  fx->Event(now, "node", "node/" + node,
            std::string(r.ok() ? "MIG reshape of GPU " : "MIG reshape failed on GPU ") +
                std::to_string(gi.index) + (r.ok() ? "" : ": " + r.message()) + " (now " +
                cluster::MigLayoutText(*alloc_.usage().gpu_mig_layout(g), gi.mig_part) + ", " +
                std::to_string(took) + " ms)" + (problems.empty() ? "" : "; " + problems));
  dirty_ = true;
}

}  // namespace hangar::controller
