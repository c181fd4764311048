// The dashboard's compact reads (web_ui.h): map cells by state, and the queue's positions and
// estimated starts as the last cycle left them.
#include "controller/web_ui.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::controller {
namespace {

TEST(GpuCodeTest, NodeStateThenHealthThenAllocation) {
  EXPECT_EQ(web::GpuCode("healthy", "ready", false, 0), 'f');
  EXPECT_EQ(web::GpuCode("healthy", "ready", true, 90), 'a');
  EXPECT_EQ(web::GpuCode("healthy", "ready", true, 2), 'i');
  EXPECT_EQ(web::GpuCode("suspect", "ready", true, 90), 's');
  EXPECT_EQ(web::GpuCode("degraded", "ready", false, 0), 's');
  EXPECT_EQ(web::GpuCode("pending_validation", "ready", false, 0), 'v');
  EXPECT_EQ(web::GpuCode("healthy", "draining", true, 90), 'd');
  EXPECT_EQ(web::GpuCode("quarantined", "draining", false, 0), 'q');
  EXPECT_EQ(web::GpuCode("failed", "ready", false, 0), 'q');
  EXPECT_EQ(web::GpuCode("healthy", "lost", true, 90), 'o');
  EXPECT_EQ(web::GpuCode("healthy", "drained", false, 0), 'o');
}

class DashboardViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
        "nodes: [{name: a}, {name: b}]\n",
        "c.yaml");
    ASSERT_TRUE(f.ok());
    ControllerOptions o;
    o.require_validation = false;
    state_ = std::make_unique<ClusterState>(f->topology, o, sched::Scheduler::Create({}).value());
    for (const char* n : {"a", "b"}) {
      pb::Register r;
      r.mutable_inventory()->set_node(n);
      for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
      Effects fx;
      ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
    }
  }
  uint64_t Submit(const std::string& yaml, Time now) {
    auto spec = job::ParseJobSpec(yaml, "job.yaml");
    EXPECT_TRUE(spec.ok());
    Effects fx;
    auto id = state_->Submit(*spec, now, &fx);
    EXPECT_TRUE(id.ok());
    return id.ok() ? *id : 0;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(DashboardViewsTest, MapHasOneLetterPerGpuInFabricOrder) {
  Submit("name: one\ntasks:\n  - {gpus: 8, command: [train]}\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  const nlohmann::json m = web::MapJson(*state_);
  ASSERT_EQ(m["nodes"].size(), 2u);
  const std::string a = m["nodes"][0][4], b = m["nodes"][1][4];
  EXPECT_EQ(m["nodes"][0][0], "a");
  // One node is wholly held (idle: no utilisation reported yet), the other free.
  EXPECT_TRUE((a == "iiiiiiii" && b == "ffffffff") || (a == "ffffffff" && b == "iiiiiiii"))
      << m.dump();
  EXPECT_EQ(m["nodes"][0][5].size(), 8u);
}

TEST_F(DashboardViewsTest, QueueGivesPositionsAndTheReservationsEstimatedStart) {
  Submit("name: running\ntime_limit: 1h\ntasks:\n  - {gpus: 8, command: [train]}\n", 1);
  Effects fx;
  state_->Schedule(2, &fx);
  const uint64_t big =
      Submit("name: big\nuser: alice\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n", 3);
  const uint64_t next =
      Submit("name: next\nuser: bob\ntasks:\n  - {replicas: 2, gpus: 8, command: [train]}\n", 4);
  Principal admin;
  nlohmann::json q = web::QueueJson(*state_, admin, 0, 10);
  // Before a cycle has seen them: in submission order, no estimate.
  ASSERT_EQ(q["total"], 2);
  EXPECT_EQ(q["jobs"][0]["id"], big);
  EXPECT_TRUE(q["jobs"][0]["estimated_start_ms"].is_null());
  state_->Schedule(5, &fx);
  q = web::QueueJson(*state_, admin, 0, 10);
  ASSERT_EQ(q["jobs"].size(), 2u) << q.dump(2);
  EXPECT_EQ(q["jobs"][0]["id"], big);
  EXPECT_EQ(q["jobs"][0]["position"], 1);
  EXPECT_EQ(q["jobs"][1]["id"], next);
  EXPECT_EQ(q["jobs"][1]["position"], 2);
  EXPECT_NE(q["jobs"][0]["reason"].get<std::string>().find("16"), std::string::npos) << q.dump(2);
  // The first blocked job holds the reservation: it starts when the running job's hour is up
  // (counted from this cycle, as its tasks have not reported running).
  ASSERT_FALSE(q["jobs"][0]["estimated_start_ms"].is_null()) << q.dump(2);
  EXPECT_EQ(q["jobs"][0]["estimated_start_ms"], 5 + kHour);
  // bob sees only his job, still second in line.
  Principal bob{.user = "bob", .role = Role::kUser};
  q = web::QueueJson(*state_, bob, 0, 10);
  EXPECT_EQ(q["total"], 1);
  ASSERT_EQ(q["jobs"].size(), 1u);
  EXPECT_EQ(q["jobs"][0]["position"], 2);
  // Paging: offset 1 of the admin's view is the second job.
  q = web::QueueJson(*state_, admin, 1, 10);
  ASSERT_EQ(q["jobs"].size(), 1u);
  EXPECT_EQ(q["jobs"][0]["id"], next);
}

}  // namespace
}  // namespace hangar::controller
