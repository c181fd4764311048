// Helpers for the scheduler's unit tests (header-only, test binaries only).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cluster/cluster_yaml.h"
#include "cluster/usage.h"
#include "job/job_spec.h"
#include "sched/request.h"

namespace hangar::sched::testing {

inline std::shared_ptr<const cluster::Topology> Cluster(const std::string& yaml) {
  auto f = cluster::ParseClusterYaml(yaml, "test-cluster.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? f->topology : nullptr;
}

// `leaves` leaf switches of `nodes_per_leaf` nodes with `gpus` H100s each, one spine.
inline std::shared_ptr<const cluster::Topology> Leaves(int leaves, int nodes_per_leaf,
                                                       int gpus = 8) {
  std::string y = "node_defaults: {gpus: " + std::to_string(gpus) +
                  ", gpu_model: H100, gpu_memory: 80Gi, cpu: 128, memory: 1Ti}\n"
                  "fat_tree: {spines: 1, leaves_per_spine: " +
                  std::to_string(leaves) + ", nodes_per_leaf: " + std::to_string(nodes_per_leaf) +
                  "}\n";
  return Cluster(y);
}

inline GangRequest Gang(const cluster::Topology& t, const std::string& yaml) {
  auto spec = job::ParseJobSpec(yaml, "test-job.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto req = CompileGang(*spec, t);
  EXPECT_TRUE(req.ok()) << req.status().ToString();
  return *req;
}

// A request for `replicas` x `gpus` whole GPUs, with an optional required domain.
inline GangRequest Whole(const cluster::Topology& t, int replicas, int gpus,
                         const std::string& same = "", const std::string& models = "") {
  std::string y = "name: j\n";
  if (!same.empty()) y += "topology: {same: " + same + "}\n";
  y += "tasks:\n  - replicas: " + std::to_string(replicas) + "\n    gpus: " + std::to_string(gpus) +
       "\n";
  if (!models.empty()) y += "    gpu_models: [" + models + "]\n";
  return Gang(t, y);
}

// Holds `gpus` GPUs of node `n` (8 GPUs per node) in `u`, as a running job does.
inline cluster::GangAssignment Hold(cluster::ClusterUsage& u, uint32_t n, uint32_t gpus) {
  cluster::GangAssignment a;
  for (uint32_t g = 0; g < gpus; ++g) a.grants.push_back({n * 8 + g, 1000, 0});
  a.tasks = {{n, 0, 0, 0, 0, 0, gpus}};
  EXPECT_TRUE(u.Allocate(a).ok());
  return a;
}

inline GangRequest Shared(const cluster::Topology& t, int milli, const std::string& mem = "8Gi") {
  return Gang(t, "name: s\ntasks:\n  - gpu_fraction: " + std::to_string(milli) +
                     "m\n    gpu_memory: " + mem + "\n");
}

}  // namespace hangar::sched::testing

#include <deque>
#include <map>

#include "sched/scheduler.h"

namespace hangar::sched::testing {

// A few lines of state owner: pending and running jobs on a ClusterUsage, driven cycle by cycle.
class MiniCluster {
 public:
  MiniCluster(std::shared_ptr<const cluster::Topology> t, SchedulerConfig cfg = {})
      : topo_(std::move(t)), usage_(topo_) {
    auto s = Scheduler::Create(cfg);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    sched_ = std::move(s).value();
  }

  // Adds a pending job; `runtime` is how long it really runs once started.
  JobId Submit(GangRequest req, Time submit, Duration runtime, Duration time_limit = 0,
               int priority = 0) {
    const JobId id = next_id_++;
    requests_.push_back(std::make_unique<GangRequest>(std::move(req)));
    PendingJob p;
    p.id = id;
    p.request = requests_.back().get();
    p.priority = priority;
    p.submit = submit;
    p.time_limit = time_limit;
    p.seq = id;
    pending_.push_back(p);
    runtime_[id] = runtime;
    return id;
  }

  // Finishes jobs due by `now`, then runs one cycle and starts what it placed.
  Decisions Step(Time now) {
    Finish(now);
    std::vector<RunningJob> running;
    for (auto& [id, r] : running_) {
      r.job.attained_service = r.assignment->TotalMilliGpu(*topo_) * (now - r.job.start) / 1000;
      running.push_back(r.job);
    }
    Snapshot snap;
    snap.usage = &usage_;
    snap.pending = pending_;
    snap.running = running;
    snap.windows = windows;
    Decisions d = sched_->Cycle(snap, now);
    std::vector<PendingJob> requeued;
    for (const auto& pre : d.preemptions) {
      auto it = running_.find(pre.victim);
      if (it == running_.end()) continue;
      usage_.Release(*it->second.assignment);
      PendingJob p;
      p.id = pre.victim;
      p.request = it->second.job.request;
      p.submit = now;
      p.seq = pre.victim;
      p.attained_service = it->second.job.attained_service;
      requeued.push_back(p);
      running_.erase(it);
    }
    std::vector<JobId> started;
    for (auto& p : d.placements) {
      const PendingJob& pj = pending_[p.pending_index];
      EXPECT_TRUE(usage_.Allocate(p.assignment).ok());
      Running r;
      r.assignment = std::make_unique<cluster::GangAssignment>(p.assignment);
      r.job.id = pj.id;
      r.job.request = pj.request;
      r.job.assignment = r.assignment.get();
      r.job.start = now;
      r.job.expected_end = pj.time_limit > 0 ? now + pj.time_limit : kNever;
      r.end = now + runtime_[pj.id];
      start_[pj.id] = now;
      started.push_back(pj.id);
      running_.emplace(pj.id, std::move(r));
    }
    std::erase_if(pending_, [&](const PendingJob& p) {
      return std::find(started.begin(), started.end(), p.id) != started.end();
    });
    pending_.insert(pending_.end(), requeued.begin(), requeued.end());
    return d;
  }

  void Finish(Time now) {
    for (auto it = running_.begin(); it != running_.end();) {
      if (it->second.end <= now) {
        usage_.Release(*it->second.assignment);
        it = running_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::optional<Time> StartOf(JobId id) const {
    auto it = start_.find(id);
    if (it == start_.end()) return std::nullopt;
    return it->second;
  }
  bool IsRunning(JobId id) const { return running_.count(id) > 0; }
  // Makes pending job `id` run inside window `w` of `windows`.
  void RunInside(JobId id, int32_t w) {
    for (auto& p : pending_) {
      if (p.id == id) p.window = w;
    }
  }
  // Reservation windows every cycle sees (Snapshot::windows).
  std::vector<NodeWindow> windows;
  const cluster::GangAssignment& AssignmentOf(JobId id) const {
    return *running_.at(id).assignment;
  }
  const cluster::ClusterUsage& usage() const { return usage_; }
  const cluster::Topology& topology() const { return *topo_; }
  size_t pending() const { return pending_.size(); }

 private:
  struct Running {
    RunningJob job;
    std::unique_ptr<cluster::GangAssignment> assignment;
    Time end = 0;
  };
  std::shared_ptr<const cluster::Topology> topo_;
  cluster::ClusterUsage usage_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<GangRequest>> requests_;
  std::vector<PendingJob> pending_;
  std::map<JobId, Running> running_;
  std::map<JobId, Duration> runtime_;
  std::map<JobId, Time> start_;
  JobId next_id_ = 1;
};

}  // namespace hangar::sched::testing
