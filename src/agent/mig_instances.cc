#include "agent/mig_instances.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "agent/gpu/mig_profiles.h"

namespace hangar::agent {

namespace {

bool Overlaps(uint32_t a_start, uint32_t a_size, uint32_t b_start, uint32_t b_size) {
  return a_start < b_start + b_size && b_start < a_start + a_size;
}

}  // namespace

MigInstances::MigInstances(GpuBackend* backend, Clock* clock, std::string node)
    : backend_(backend), clock_(clock), node_(std::move(node)) {}

void MigInstances::Init(const StaticMigLayout& layout, std::vector<pb::GpuInfo>* gpus,
                        std::map<std::string, std::vector<MigSlot>> claims) {
  MutexLock l(mu_);
  for (auto& g : *gpus) {
    if (!g.mig()) continue;
    MigLayout has(g.mig_layout().begin(), g.mig_layout().end());
    auto want = PlaceStaticMigLayout(layout, g.index(), static_cast<int64_t>(g.memory_mib()));
    if (!want.ok()) {
      spdlog::error("agent {}: {}; GPU {} keeps its layout ({})", node_, want.status().message(),
                    g.index(), DescribeMigLayout(has));
    } else if (!want->empty() && !has.empty()) {
      spdlog::info(
          "agent {}: GPU {} has MIG instances already ({}); the static layout is not applied",
          node_, g.index(), DescribeMigLayout(has));
    } else if (!want->empty()) {
      MigReshapeResult r = backend_->ReshapeMig(g.index(), {}, *want);
      has = r.layout;
      if (r.status.ok()) {
        spdlog::info("agent {}: GPU {}: created the static MIG layout {}", node_, g.index(),
                     DescribeMigLayout(has));
      } else {
        spdlog::error("agent {}: GPU {}: static MIG layout: {}; it has {}", node_, g.index(),
                      r.status.message(), DescribeMigLayout(has));
      }
    }
    g.clear_mig_layout();
    layouts_[g.index()] = std::move(has);
  }
  gpus_ = *gpus;
  claims_ = std::move(claims);
}

MigLayout MigInstances::LayoutOf(uint32_t gpu) const {
  MutexLock l(mu_);
  auto it = layouts_.find(gpu);
  return it == layouts_.end() ? MigLayout() : it->second;
}

void MigInstances::Enqueue(const pb::MigReshape& r) { queue_.Push(r); }

void MigInstances::Loop(const std::atomic<bool>* stop,
                        const std::function<void(const pb::MigReshaped&)>& answer) {
  while (true) {
    std::optional<pb::MigReshape> r = queue_.PopFor(std::chrono::milliseconds(100), stop);
    if (*stop) return;
    if (!r) continue;
    const pb::MigReshaped done = Apply(*r);
    if (done.ok()) {
      spdlog::info("agent {}: GPU {} re-cut in {} ms: {}", node_, done.gpu_index(),
                   done.duration_ms(),
                   DescribeMigLayout({done.layout().begin(), done.layout().end()}));
    } else {
      spdlog::warn("agent {}: MIG reshape {} of GPU {}: {}", node_, done.id(), done.gpu_index(),
                   done.message());
    }
    answer(done);
  }
}

Status MigInstances::RefuseBusy(const pb::MigReshape& r, const MigLayout& destroy) const {
  for (const auto& [task, slots] : claims_) {
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

pb::MigReshaped MigInstances::Apply(const pb::MigReshape& r) {
  const Time started = clock_->Now();
  pb::MigReshaped out;
  out.set_id(r.id());
  out.set_gpu_index(r.gpu_index());
  auto gpu = std::find_if(gpus_.begin(), gpus_.end(),
                          [&](const pb::GpuInfo& g) { return g.index() == r.gpu_index(); });
  MigLayout destroy(r.destroy().begin(), r.destroy().end()),
      create(r.create().begin(), r.create().end());
  Status ok =
      gpu == gpus_.end()
          ? Status::NotFound("GPU " + std::to_string(r.gpu_index()) + " is not on node " + node_)
      : !gpu->mig() ? Status::FailedPrecondition("GPU " + std::to_string(r.gpu_index()) +
                                                 " is not in MIG mode; nothing was changed")
                    : Status::Ok();
  for (auto& c : create) {
    if (ok.ok()) ok = CompleteMigInstance(static_cast<int64_t>(gpu->memory_mib()), &c);
  }
  bool apply = false;
  {
    MutexLock l(mu_);
    const MigLayout& now = layouts_[r.gpu_index()];
    if (ok.ok() && MigReshapeDone(now, destroy, create)) {
      out.set_message("the GPU has that layout already");
    } else {
      if (ok.ok()) ok = CheckMigReshape(now, destroy, create);
      if (ok.ok()) ok = RefuseBusy(r, destroy);
      apply = ok.ok();
      if (apply) reshaping_[r.gpu_index()] = destroy;  // launches into these are refused now
    }
    for (const auto& mi : now) *out.add_layout() = mi;
  }
  if (apply) {
    MigReshapeResult res = backend_->ReshapeMig(r.gpu_index(), destroy, create);
    ok = res.status;
    MutexLock l(mu_);
    reshaping_.erase(r.gpu_index());
    // After a failure the read-back may be empty; keep what is known then.
    if (res.status.ok() || !res.layout.empty() || destroy.size() + create.size() == 0) {
      layouts_[r.gpu_index()] = res.layout;
    }
    out.clear_layout();
    for (const auto& mi : layouts_[r.gpu_index()]) *out.add_layout() = mi;
  }
  out.set_ok(ok.ok());
  if (!ok.ok()) out.set_message(ok.message());
  out.set_duration_ms(clock_->Now() - started);
  return out;
}

StatusOr<MigInstances::Claim> MigInstances::ClaimFor(const pb::Launch& l) {
  Claim claim;
  if (l.mig_instances_size() == 0) return claim;
  HANGAR_RETURN_IF_ERROR(CheckMigInstances(gpus_, l));
  MutexLock lock(mu_);
  for (const pb::MigInstance& mi : l.mig_instances()) {
    const std::string where = "GPU " + std::to_string(mi.gpu_index()) + " of node " + node_;
    const MigLayout& layout = layouts_[mi.gpu_index()];
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
    auto busy = reshaping_.find(mi.gpu_index());
    if (busy != reshaping_.end() && FindMigInstance(busy->second, mi.start(), mi.memory_slices())) {
      return Status::FailedPrecondition(where + " is being re-cut and its instance at slice " +
                                        std::to_string(mi.start()) + " is going away");
    }
    claim.devices += (claim.devices.empty() ? "" : ",") + have->uuid();
    claim.uuids.push_back(have->uuid());
    claim.slots.push_back({mi.gpu_index(), mi.start(), mi.memory_slices()});
  }
  claims_[l.task_id()] = claim.slots;
  return claim;
}

void MigInstances::Release(const std::string& task_id) {
  MutexLock l(mu_);
  claims_.erase(task_id);
}

}  // namespace hangar::agent
