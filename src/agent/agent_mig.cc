// The agent's MIG instances: the layout of each MIG-mode GPU (in the inventory and
// after every change), the static layout created at start, MigReshape from the controller --
// refused whole while a task of this agent runs in an instance it destroys, applied on a thread
// of its own and answered with MigReshaped -- and the instances tasks run in
// (CUDA_VISIBLE_DEVICES=MIG-<uuid>).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/agent.h"
#include "agent/gpu/mig_profiles.h"

namespace hangar::agent {

namespace {

bool Overlaps(uint32_t a_start, uint32_t a_size, uint32_t b_start, uint32_t b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

}  // namespace

void Agent::InitMig() {
  std::lock_guard<std::mutex> l(mig_mu_);
  for (auto& g : gpus_.gpus) {
    if (!g.mig()) continue;
    MigLayout layout(g.mig_layout().begin(), g.mig_layout().end());
    auto want =
        PlaceStaticMigLayout(options_.mig_layout, g.index(), static_cast<int64_t>(g.memory_mib()));
    if (!want.ok()) {
      spdlog::error("agent {}: {}; GPU {} keeps its layout ({})", options_.node,
                    want.status().message(), g.index(), DescribeMigLayout(layout));
    } else if (!want->empty() && !layout.empty()) {
      spdlog::info(
          "agent {}: GPU {} has MIG instances already ({}); the static layout is not applied",
          options_.node, g.index(), DescribeMigLayout(layout));
    } else if (!want->empty()) {
      MigReshapeResult r = backend_->ReshapeMig(g.index(), {}, *want);
      layout = r.layout;
      if (r.status.ok()) {
        spdlog::info("agent {}: GPU {}: created the static MIG layout {}", options_.node, g.index(),
                     DescribeMigLayout(layout));
      } else {
        spdlog::error("agent {}: GPU {}: static MIG layout: {}; it has {}", options_.node,
                      g.index(), r.status.message(), DescribeMigLayout(layout));
      }
    }
    g.clear_mig_layout();
    mig_layouts_[g.index()] = layout;
  }
  std::lock_guard<std::mutex> r(mu_);
  for (const auto& [id, rec] : records_) {
    if (!rec.ended && !rec.mig.empty()) mig_claims_[id] = rec.mig;
  }
}

void Agent::HandleMigReshape(const pb::MigReshape& r) {
  std::lock_guard<std::mutex> l(mig_mu_);
  mig_queue_.push_back(r);
  mig_cv_.notify_all();
}

void Agent::MigLoop(const std::atomic<bool>* stop) {
  while (true) {
    pb::MigReshape r;
    {
      std::unique_lock<std::mutex> l(mig_mu_);
      mig_cv_.wait_for(l, std::chrono::milliseconds(100),
                       [&] { return !mig_queue_.empty() || *stop; });
      if (*stop) return;
      if (mig_queue_.empty()) continue;
      r = mig_queue_.front();
      mig_queue_.pop_front();
    }
    pb::AgentMessage m;
    *m.mutable_mig_reshaped() = ApplyMigReshape(r);
    const pb::MigReshaped& done = m.mig_reshaped();
    if (done.ok()) {
      spdlog::info("agent {}: GPU {} re-cut in {} ms: {}", options_.node, done.gpu_index(),
                   done.duration_ms(),
                   DescribeMigLayout({done.layout().begin(), done.layout().end()}));
    } else {
      spdlog::warn("agent {}: MIG reshape {} of GPU {}: {}", options_.node, done.id(),
                   done.gpu_index(), done.message());
    }
    Write(m);
  }
}

Status Agent::RefuseBusyMig(const pb::MigReshape& r, const MigLayout& destroy) {
  for (const auto& [task, slots] : mig_claims_) {
    for (const auto& s : slots) {
      if (s[0] != r.gpu_index()) continue;
      for (const auto& d : destroy) {
        if (Overlaps(s[1], s[2], d.start(), d.memory_slices())) {
          return Status::FailedPrecondition(
              "task " + task + " runs in the instance at slice " + std::to_string(s[1]) +
              " of GPU " + std::to_string(r.gpu_index()) + "; nothing was changed");
        }
      }
    }
  }
  return Status::Ok();
}

pb::MigReshaped Agent::ApplyMigReshape(const pb::MigReshape& r) {
  const Time started = clock_->Now();
  pb::MigReshaped out;
  out.set_id(r.id());
  out.set_gpu_index(r.gpu_index());
  auto gpu = std::find_if(gpus_.gpus.begin(), gpus_.gpus.end(),
                          [&](const pb::GpuInfo& g) { return g.index() == r.gpu_index(); });
  MigLayout destroy(r.destroy().begin(), r.destroy().end()),
      create(r.create().begin(), r.create().end());
  Status ok = gpu == gpus_.gpus.end() ? Status::NotFound("GPU " + std::to_string(r.gpu_index()) +
                                                         " is not on node " + options_.node)
              : !gpu->mig() ? Status::FailedPrecondition("GPU " + std::to_string(r.gpu_index()) +
                                                         " is not in MIG mode; nothing was changed")
                            : Status::Ok();
  for (auto& c : create) {
    if (ok.ok()) ok = CompleteMigInstance(static_cast<int64_t>(gpu->memory_mib()), &c);
  }
  bool apply = false;
  {
    std::lock_guard<std::mutex> l(mig_mu_);
    const MigLayout& now = mig_layouts_[r.gpu_index()];
    if (ok.ok() && MigReshapeDone(now, destroy, create)) {
      out.set_message("the GPU has that layout already");
    } else {
      if (ok.ok()) ok = CheckMigReshape(now, destroy, create);
      if (ok.ok()) ok = RefuseBusyMig(r, destroy);
      apply = ok.ok();
      if (apply) mig_reshaping_[r.gpu_index()] = destroy;  // launches into these are refused now
    }
    for (const auto& mi : now) *out.add_layout() = mi;
  }
  if (apply) {
    MigReshapeResult res = backend_->ReshapeMig(r.gpu_index(), destroy, create);
    ok = res.status;
    std::lock_guard<std::mutex> l(mig_mu_);
    mig_reshaping_.erase(r.gpu_index());
    // After a failure the read-back may be empty; keep what is known then.
    if (res.status.ok() || !res.layout.empty() || destroy.size() + create.size() == 0) {
      mig_layouts_[r.gpu_index()] = res.layout;
    }
    out.clear_layout();
    for (const auto& mi : mig_layouts_[r.gpu_index()]) *out.add_layout() = mi;
  }
  out.set_ok(ok.ok());
  if (!ok.ok()) out.set_message(ok.message());
  out.set_duration_ms(clock_->Now() - started);
  return out;
}

Status Agent::ClaimMigInstances(const pb::Launch& l, TaskLaunch* launch, TaskRecord* r) {
  if (l.mig_instances_size() == 0) return Status::Ok();
  HANGAR_RETURN_IF_ERROR(CheckMigInstances(gpus_.gpus, l));
  std::lock_guard<std::mutex> lock(mig_mu_);
  std::string devices;
  std::vector<std::array<uint32_t, 3>> slots;
  std::vector<std::string> uuids;
  for (const pb::MigInstance& mi : l.mig_instances()) {
    const std::string where = "GPU " + std::to_string(mi.gpu_index()) + " of node " + options_.node;
    const MigLayout& layout = mig_layouts_[mi.gpu_index()];
    const pb::MigGpuInstance* have = FindMigInstance(layout, mi.start(), mi.memory_slices());
    if (!have || have->profile() != mi.profile()) {
      return Status::FailedPrecondition(where + " has no MIG instance " + mi.profile() +
                                        " at slice " + std::to_string(mi.start()) + " (it has " +
                                        DescribeMigLayout(layout) +
                                        "); the controller must create it with a MigReshape first");
    }
    if (have->uuid().empty()) {
      return Status::FailedPrecondition(
          where + ": the MIG instance at slice " + std::to_string(mi.start()) +
          " has no single compute instance over all of it, so no MIG device to "
          "give the task; re-create it");
    }
    auto busy = mig_reshaping_.find(mi.gpu_index());
    if (busy != mig_reshaping_.end() &&
        FindMigInstance(busy->second, mi.start(), mi.memory_slices())) {
      return Status::FailedPrecondition(where + " is being re-cut and its instance at slice " +
                                        std::to_string(mi.start()) + " is going away");
    }
    devices += (devices.empty() ? "" : ",") + have->uuid();
    uuids.push_back(have->uuid());
    slots.push_back({mi.gpu_index(), mi.start(), mi.memory_slices()});
  }
  auto it = std::find_if(launch->env.begin(), launch->env.end(),
                         [](const auto& kv) { return kv.first == "CUDA_VISIBLE_DEVICES"; });
  if (it != launch->env.end())
    it->second = devices;
  else
    launch->env.emplace_back("CUDA_VISIBLE_DEVICES", devices);
  mig_claims_[l.task_id()] = slots;
  r->mig = slots;
  r->mig_devices = std::move(uuids);
  return Status::Ok();
}

void Agent::ReleaseMigInstances(const std::string& task_id) {
  std::lock_guard<std::mutex> l(mig_mu_);
  mig_claims_.erase(task_id);
}

}  // namespace hangar::agent
