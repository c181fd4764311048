// ClusterState as the scheduler's owner: what it hands the cycle (the snapshot) and how it reads
// the decisions back.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/cluster_state.h"

namespace hangar::controller {
namespace {

job::JobSpec Spec(const std::string& yaml) {
  auto s = job::ParseJobSpec(yaml, "job.yaml");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

class SchedOwnerTest : public ::testing::Test {
 protected:
  // One node of `gpus` GPUs, registered.
  void Start(sched::SchedulerConfig cfg, int gpus = 8) {
    auto f = cluster::ParseClusterYaml("node_defaults: {gpus: " + std::to_string(gpus) +
                                           ", gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
                                           "nodes: [{name: a}]\n",
                                       "c.yaml");
    ASSERT_TRUE(f.ok());
    ControllerOptions o;
    o.require_validation = false;
    auto s = sched::Scheduler::Create(cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    state_ = std::make_unique<ClusterState>(f->topology, o, std::move(s).value());
    pb::Register r;
    r.mutable_inventory()->set_node("a");
    for (int i = 0; i < gpus; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
  }
  sched::JobId Submit(const std::string& yaml, Time now) {
    Effects fx;
    auto id = state_->Submit(Spec(yaml), now, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : 0;
  }
  std::string StateOf(sched::JobId id) const { return state_->GetJob(id)->state; }
  std::string RuleOf(sched::JobId id) const { return state_->GetJob(id)->reason_rule; }
  void Task(const std::string& task, pb::TaskStatus::State st, Time now) {
    pb::TaskStatus s;
    s.set_task_id(task);
    s.set_state(st);
    Effects fx;
    state_->OnTaskStatus("a", s, now, &fx);
  }
  std::unique_ptr<ClusterState> state_;
};

// The cycle stops after one placement; the job it did not reach is the one that says so, not
// whichever job sits at that index of the controller's id-ordered list.
TEST_F(SchedOwnerTest, NotExaminedGoesToTheJobsTheCycleDidNotReach) {
  Start({.max_placements = 1});
  const auto low = Submit("name: low\npriority: 1\ntasks: [{gpus: 1, command: [x]}]\n", 1);
  const auto high = Submit("name: high\npriority: 9\ntasks: [{gpus: 1, command: [x]}]\n", 2);
  Effects fx;
  state_->Schedule(3, &fx);
  EXPECT_EQ(StateOf(high), "starting");
  EXPECT_EQ(StateOf(low), "pending");
  EXPECT_EQ(RuleOf(low), "not-examined");
}

}  // namespace
}  // namespace hangar::controller
