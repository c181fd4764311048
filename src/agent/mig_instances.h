// The MIG instances of this node's MIG-mode GPUs, and who runs in them: one owner for the layout
// of each MIG GPU (in the inventory and after every change), the static layout created at start,
// the reshapes the controller asks for -- queued, applied in order on a thread of the agent's, and
// refused whole while a task runs in an instance they destroy -- and the instances each running
// task has claimed (a launch gets CUDA_VISIBLE_DEVICES=MIG-<uuid>,...).
//
// Thread-safe: the agent's stream thread queues reshapes, its MIG thread applies them, launches
// claim and task ends release, the register message reads the layouts.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/gpu/gpu_backend.h"
#include "agent/gpu/mig_layout.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/time.h"
#include "common/work_queue.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

// One MIG instance a task runs in: {GPU index, start slice, memory slices}.
using MigSlot = std::array<uint32_t, 3>;

class MigInstances {
 public:
  // `backend` and `clock` outlive it; `node` names this node in what it says.
  MigInstances(GpuBackend* backend, Clock* clock, std::string node);

  // At start: each MIG GPU of `gpus` keeps the instances it has, or gets the instances `layout`
  // asks for when it has none (a layout that does not fit is logged; the GPU keeps what it has).
  // The layouts move out of `gpus` into this owner (LayoutOf). `claims`: the instances the tasks
  // still running from before a restart hold, by task.
  void Init(const StaticMigLayout& layout, std::vector<pb::GpuInfo>* gpus,
            std::map<std::string, std::vector<MigSlot>> claims) HANGAR_EXCLUDES(mu_);
  // GPU `gpu`'s instances now (empty: none, or not a MIG GPU).
  MigLayout LayoutOf(uint32_t gpu) const HANGAR_EXCLUDES(mu_);

  // Queues a reshape; Loop applies it after those queued before.
  void Enqueue(const pb::MigReshape& r) HANGAR_EXCLUDES(mu_);
  // Applies the queued reshapes in order until *stop, giving each one's answer to `answer`.
  void Loop(const std::atomic<bool>* stop,
            const std::function<void(const pb::MigReshaped&)>& answer) HANGAR_EXCLUDES(mu_);
  // Applies one reshape now: refused whole, nothing changed, when the GPU is not a MIG GPU of this
  // node, when it does not fit the layout, or when a task runs in an instance it destroys.
  pb::MigReshaped Apply(const pb::MigReshape& r) HANGAR_EXCLUDES(mu_);

  // The instances launch `l` asks for, claimed for its task: the devices for its
  // CUDA_VISIBLE_DEVICES ("MIG-<uuid>,..."), the slots and the UUIDs. A launch that asks for none
  // claims nothing (empty devices). FailedPrecondition when an instance is missing, has no single
  // compute instance, or is going away in a reshape.
  struct Claim {
    std::string devices;
    std::vector<MigSlot> slots;
    std::vector<std::string> uuids;
  };
  StatusOr<Claim> ClaimFor(const pb::Launch& l) HANGAR_EXCLUDES(mu_);
  // Task `task_id` has ended: its instances are free for a reshape.
  void Release(const std::string& task_id) HANGAR_EXCLUDES(mu_);

 private:
  Status RefuseBusy(const pb::MigReshape& r, const MigLayout& destroy) const HANGAR_REQUIRES(mu_);

  GpuBackend* const backend_;
  Clock* const clock_;
  const std::string node_;
  std::vector<pb::GpuInfo> gpus_;  // as Init found them (no layouts); read-only after Init
  mutable Mutex mu_;
  std::map<uint32_t, MigLayout> layouts_ HANGAR_GUARDED_BY(mu_);  // by MIG GPU: its instances
  std::map<std::string, std::vector<MigSlot>> claims_ HANGAR_GUARDED_BY(mu_);  // by running task
  // By GPU: the instances a reshape in progress destroys (launches into them are refused).
  std::map<uint32_t, MigLayout> reshaping_ HANGAR_GUARDED_BY(mu_);
  WorkQueue<pb::MigReshape> queue_;
};

}  // namespace hangar::agent
