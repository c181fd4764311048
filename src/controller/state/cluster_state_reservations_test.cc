// Reservations and maintenance windows in the controller's state: who may run in one, who is
// kept out, and what a maintenance window does to the jobs and nodes it covers.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"
#include "controller/state/state_test_util.h"

namespace hangar::controller {
namespace {

class ReservationStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: n-1}, {name: n-2}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    state_ = std::make_unique<ClusterState>(f->topology, ControllerOptions{},
                                            sched::Scheduler::Create({}).value());
    for (const char* n : {"n-1", "n-2"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      for (int g = 0; g < 8; ++g) r.mutable_inventory()->add_gpus()->set_index(g);
      Effects fx;
      ASSERT_TRUE(state_->OnRegister(r, now_, &fx).ok());
    }
    Effects fx;
    state_->EvaluateHealth(now_, &fx);
    for (const char* n : {"n-1", "n-2"}) Validate(n);
    Health();
    ASSERT_EQ(state_->GetNode("n-1")->state, "ready");
  }

  void Validate(const std::string& node) {
    pb::ValidationResult v;
    v.set_json(testing::HealthyValidationJson());
    v.set_ok(true);
    state_->OnValidation(node, v, now_);
  }

  Effects Health() {
    Effects fx;
    state_->EvaluateHealth(now_, &fx);
    return fx;
  }

  // The state owner's timers at `now_`: the once-a-second tick, the health rules, a cycle.
  Effects At(Time t) {
    now_ = t;
    Effects fx;
    state_->Tick(now_, &fx);
    state_->EvaluateHealth(now_, &fx);
    state_->Schedule(now_, &fx);
    return fx;
  }

  StatusOr<sched::JobId> Submit(const std::string& user, const std::string& extra) {
    auto spec = job::ParseJobSpec("name: j\n" + extra + "tasks:\n  - {gpus: 8, command: [train]}\n",
                                  "j.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    spec->user = user;
    Effects fx;
    return state_->Submit(*spec, now_, &fx);
  }

  Status Book(const std::string& json) {
    Effects fx;
    return state_->CreateReservation(admin_, nlohmann::json::parse(json), now_, &fx).status();
  }

  void Running(sched::JobId id, uint32_t attempt) {
    pb::TaskStatus s;
    s.set_task_id(std::to_string(id) + "." + std::to_string(attempt) + ".0");
    s.set_state(pb::TaskStatus::RUNNING);
    Effects fx;
    auto job = state_->GetJob(id);
    ASSERT_TRUE(job.ok());
    ASSERT_TRUE(
        state_->OnTaskStatus(job->task_views.empty() ? "" : job->task_views[0].node, s, now_, &fx)
            .ok());
  }

  std::unique_ptr<ClusterState> state_;
  Principal admin_{"ops", Role::kAdmin};
  Time now_ = 1'799'056'800'000 - kDay;  // a day before 2027-01-04T10:00:00Z
};

constexpr Time kStart = 1'799'056'800'000;  // 2027-01-04T10:00:00Z

TEST_F(ReservationStateTest, AReservationKeepsOthersOutAndLetsItsUsersIn) {
  ASSERT_TRUE(
      Book(
          R"({"name": "deadline", "nodes": "n-1", "start": "2027-01-04T10:00:00Z", "duration": "2h",
                      "users": ["alice"]})")
          .ok());
  // Only its users may name it.
  auto bob_inside = Submit("bob", "reservation: deadline\n");
  EXPECT_EQ(bob_inside.status().code(), StatusCode::kPermissionDenied);
  auto alice = Submit("alice", "reservation: deadline\n");
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  At(now_);
  EXPECT_EQ(state_->GetJob(*alice)->reason,
            "runs inside reservation deadline, which opens at 2027-01-04T10:00:00Z");
  // Others' jobs without a time limit would cross the window: only n-2 takes them.
  auto bob1 = Submit("bob", "");
  auto bob2 = Submit("bob", "");
  At(now_ + 1000);
  EXPECT_EQ(state_->GetJob(*bob1)->state, "starting");
  EXPECT_EQ(state_->GetJob(*bob1)->task_views[0].node, "n-2");
  EXPECT_EQ(state_->GetJob(*bob2)->state, "pending");
  EXPECT_EQ(state_->GetJob(*bob2)->reason,
            "fits only on nodes held by reservation deadline (2027-01-04T10:00:00Z to "
            "2027-01-04T12:00:00Z), and its "
            "time limit would cross the window's start (a job without a time limit counts as "
            "running for ever)");
  EXPECT_EQ(state_->GetJob(*bob2)->reason_rule, "reservation-window");
  // A job that surely ends before the window may use the node meanwhile.
  auto shorty = Submit("bob", "time_limit: 1h\n");
  At(now_ + 1000);
  EXPECT_EQ(state_->GetJob(*shorty)->task_views[0].node, "n-1");
  At(kStart);
  EXPECT_EQ(state_->GetJob(*alice)->state, "pending");  // n-1 is still busy with `shorty`
  Effects fx;
  pb::TaskStatus done;
  done.set_task_id(std::to_string(*shorty) + ".0.0");
  done.set_state(pb::TaskStatus::EXITED);
  ASSERT_TRUE(state_->OnTaskStatus("n-1", done, now_, &fx).ok());
  At(kStart + 1000);
  EXPECT_EQ(state_->GetJob(*alice)->state, "starting");
  EXPECT_EQ(state_->GetJob(*alice)->task_views[0].node, "n-1");
  EXPECT_EQ(state_->GetJob(*bob2)->state, "pending");
  // Once the window ends, n-1 is anyone's again and the reservation is gone.
  done.set_task_id(std::to_string(*alice) + ".0.0");
  ASSERT_TRUE(state_->OnTaskStatus("n-1", done, now_, &fx).ok());
  At(kStart + 2 * kHour);
  EXPECT_EQ(state_->GetJob(*bob2)->task_views[0].node, "n-1");
  EXPECT_TRUE(state_->ReservationsJson(now_)["reservations"].empty());
}

TEST_F(ReservationStateTest, AMaintenanceWindowCheckpointsBeforeItOpensDrainsAndValidatesAfter) {
  auto job = Submit("bob", "checkpoint: {signal: USR1, grace: 5m}\n");
  At(now_);
  ASSERT_EQ(state_->GetJob(*job)->state, "starting");
  const std::string node = state_->GetJob(*job)->task_views[0].node;
  Running(*job, 0);
  ASSERT_TRUE(Book(R"({"name": "maint1", "nodes": ")" + node +
                   R"(", "start": "2027-01-04T10:00:00Z", "duration": "1h", "maintenance": true})")
                  .ok());
  // Its grace (5 min) and the stop grace after it (10 s) must end by the start: not signalled
  // sooner.
  const Time lead = 5 * kMinute + ControllerOptions{}.stop_grace;
  for (const auto& m : At(kStart - lead - 1000).messages) EXPECT_FALSE(m.message.has_stop());
  EXPECT_EQ(state_->GetJob(*job)->state, "running");
  Effects signalled = At(kStart - lead);
  int stops = 0;
  for (const auto& m : signalled.messages) {
    if (!m.message.has_stop()) continue;
    ++stops;
    EXPECT_EQ(m.node, node);
    EXPECT_EQ(m.message.stop().checkpoint_signal(), 10);  // SIGUSR1
    EXPECT_EQ(m.message.stop().grace_ms(), 5 * kMinute);
  }
  EXPECT_EQ(stops, 1);
  EXPECT_EQ(state_->GetJob(*job)->message,
            "maintenance window maint1 opens at 2027-01-04T10:00:00Z on its nodes: checkpointed "
            "and requeued");
  // It stops; it runs again on the other node, not on the one under maintenance.
  pb::TaskStatus ended;
  ended.set_task_id(std::to_string(*job) + ".0.0");
  ended.set_state(pb::TaskStatus::EXITED);
  ended.set_stopped(true);
  Effects fx;
  ASSERT_TRUE(state_->OnTaskStatus(node, ended, now_, &fx).ok());
  At(now_ + 1000);
  ASSERT_EQ(state_->GetJob(*job)->state, "starting");
  EXPECT_NE(state_->GetJob(*job)->task_views[0].node, node);
  // At the start the node drains; at the end it is validated before it takes work again.
  At(kStart);
  At(kStart + 1000);
  EXPECT_EQ(state_->GetNode(node)->state, "drained");
  EXPECT_EQ(state_->GetNode(node)->reason, "maintenance window maint1 until 2027-01-04T11:00:00Z");
  Effects after = At(kStart + kHour);
  Effects asked = At(kStart + kHour + 1000);
  int validations = 0;
  for (const Effects* e : {&after, &asked}) {
    for (const auto& m : e->messages) validations += m.message.has_validate() && m.node == node;
  }
  EXPECT_EQ(validations, 1);
  EXPECT_EQ(state_->GetNode(node)->state, "pending_validation");
  EXPECT_TRUE(state_->ReservationsJson(now_)["reservations"].empty());
  Validate(node);
  Health();
  EXPECT_EQ(state_->GetNode(node)->state, "ready");
}

TEST_F(ReservationStateTest, ReservationsSurviveARestart) {
  ASSERT_TRUE(
      Book(R"({"name": "r", "nodes": "n-1", "start": "2027-01-04T10:00:00Z", "duration": "1h",
                      "queues": ["default"]})")
          .ok());
  Effects fx;
  ASSERT_TRUE(state_
                  ->CreateReservation(admin_, nlohmann::json::parse(R"({"name": "m", "nodes": "n-2",
      "start": "2027-01-05T10:00:00Z", "duration": "1h", "maintenance": true})"),
                                      now_, &fx)
                  .ok());
  StoreContents contents;
  for (auto& v : fx.batch.values) contents.values.push_back(v);
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [{name: n-1}, {name: n-2}]\n",
      "c.yaml");
  ClusterState again(f->topology, ControllerOptions{}, sched::Scheduler::Create({}).value());
  ASSERT_TRUE(again.Restore(contents, now_).ok());
  const nlohmann::json list = again.ReservationsJson(now_)["reservations"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "m");
  EXPECT_EQ(list[0]["maintenance"], true);
  EXPECT_EQ(list[0]["nodes"], nlohmann::json::array({"n-2"}));
  EXPECT_EQ(list[0]["state"], "scheduled");
}

}  // namespace
}  // namespace hangar::controller
