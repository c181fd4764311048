// ClusterState and MIG: layouts from the agents' reports, reshapes sent for MIG jobs that found no
// instance, the answer's layout taken whether the reshape went or not, fixed layouts left alone.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

constexpr const char* kCluster =
    "node_defaults: {gpus: 2, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi, mig: "
    "true}\n"
    "nodes: [{name: a}, {name: b}]\n";

pb::MigGpuInstance Instance(const std::string& profile, int start, int memory, int compute) {
  pb::MigGpuInstance mi;
  mi.set_profile(profile);
  mi.set_start(start);
  mi.set_memory_slices(memory);
  mi.set_compute_slices(compute);
  mi.set_uuid("MIG-" + profile + "-" + std::to_string(start));
  return mi;
}

class MigStateTest : public ::testing::Test {
 protected:
  void Start(const std::string& extra = "") {
    auto f = cluster::ParseClusterYaml(std::string(kCluster) + extra, "c.yaml");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ControllerOptions o;
    o.require_validation = false;
    o.mig_fixed_layouts = f->mig_fixed_layouts;
    auto s = sched::Scheduler::Create({});
    ASSERT_TRUE(s.ok());
    state_ = std::make_unique<ClusterState>(f->topology, o, std::move(s).value());
  }
  // Registers `node`; GPU 0 reports `gpu0` as its instances, GPU 1 none.
  void Register(const std::string& node, const std::vector<pb::MigGpuInstance>& gpu0) {
    pb::Register r;
    r.mutable_inventory()->set_node(node);
    for (int i = 0; i < 2; ++i) {
      pb::GpuInfo* g = r.mutable_inventory()->add_gpus();
      g->set_index(i);
      g->set_mig(true);
      if (i == 0) {
        for (const auto& mi : gpu0) *g->add_mig_layout() = mi;
      }
    }
    Effects fx;
    ASSERT_TRUE(state_->OnRegister(r, 0, &fx).ok());
  }
  sched::JobId Submit(const std::string& profile) {
    auto spec =
        job::ParseJobSpec("name: m\ntasks: [{mig: " + profile + ", command: [x]}]\n", "j.yaml");
    EXPECT_TRUE(spec.ok());
    Effects fx;
    auto id = state_->Submit(*spec, 1, &fx);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return *id;
  }
  std::vector<Outgoing> Cycle(Time now) {
    Effects fx;
    state_->Schedule(now, &fx);
    return fx.messages;
  }
  static const pb::MigReshape* ReshapeIn(const std::vector<Outgoing>& out, std::string* node) {
    for (const auto& m : out) {
      if (m.message.has_mig_reshape()) {
        *node = m.node;
        return &m.message.mig_reshape();
      }
    }
    return nullptr;
  }
  std::unique_ptr<ClusterState> state_;
};

TEST_F(MigStateTest, AJobWithoutAnInstanceGetsAReshapeThenRunsInTheNewInstance) {
  Start();
  Register("a", {});
  const auto id = Submit("3g.40gb");
  auto out = Cycle(2);
  std::string node;
  const pb::MigReshape* r = ReshapeIn(out, &node);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(node, "a");
  EXPECT_EQ(r->gpu_index(), 0u);
  EXPECT_EQ(r->destroy_size(), 0);
  ASSERT_EQ(r->create_size(), 1);
  EXPECT_EQ(r->create(0).profile(), "3g.40gb");
  EXPECT_EQ(r->create(0).start(), 4u);
  EXPECT_EQ(r->create(0).memory_slices(), 4u);
  EXPECT_EQ(state_->GetJob(id)->state, "pending");
  const uint64_t reshape_id = r->id();  // r points into `out`, which the next line replaces
  // While the agent works, nothing else is sent for it.
  out = Cycle(3);
  EXPECT_EQ(ReshapeIn(out, &node), nullptr);
  EXPECT_EQ(state_->mig_reshape_stats().in_flight, 1);
  // Done: the layout the agent reports is the GPU's, and the job starts in it.
  pb::MigReshaped done;
  done.set_id(reshape_id);
  done.set_gpu_index(0);
  done.set_ok(true);
  *done.add_layout() = Instance("3g.40gb", 4, 4, 3);
  Effects fx;
  state_->OnMigReshaped("a", done, 1500, &fx);
  EXPECT_EQ(state_->mig_reshape_stats().done, 1);
  EXPECT_EQ(state_->mig_reshape_stats().in_flight, 0);
  out = Cycle(1600);
  const pb::Launch* launch = nullptr;
  for (const auto& m : out) {
    if (m.message.has_launch()) launch = &m.message.launch();
  }
  ASSERT_NE(launch, nullptr);
  ASSERT_EQ(launch->mig_instances_size(), 1);
  EXPECT_EQ(launch->mig_instances(0).start(), 4u);
}

TEST_F(MigStateTest, AFailedReshapeLeavesTheReportedLayoutAndIsCounted) {
  Start();
  Register("a", {Instance("1g.10gb", 4, 1, 1), Instance("1g.10gb", 5, 1, 1)});
  Submit("3g.40gb");
  std::string node;
  auto out = Cycle(2);
  const pb::MigReshape* r = ReshapeIn(out, &node);
  ASSERT_NE(r, nullptr);
  pb::MigReshaped failed;
  failed.set_id(r->id());
  failed.set_gpu_index(r->gpu_index());
  failed.set_ok(false);
  failed.set_message("nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient Resources");
  *failed.add_layout() = Instance("1g.10gb", 5, 1, 1);  // what is there now
  Effects fx;
  state_->OnMigReshaped("a", failed, 10, &fx);
  EXPECT_EQ(state_->mig_reshape_stats().failed, 1);
  bool said = false;
  for (const auto& e : fx.batch.events)
    said = said || e.message.find("Insufficient Resources") != std::string::npos;
  EXPECT_TRUE(said);
  // A forged or stale answer (another node, an unknown id) changes nothing.
  state_->OnMigReshaped("b", failed, 11, &fx);
  EXPECT_EQ(state_->mig_reshape_stats().failed, 1);
}

TEST_F(MigStateTest, FixedLayoutsAreNeverReshaped) {
  Start(
      "mig: {fixed_layouts: {a: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, "
      "1g.10gb]}}\n");
  Register("a", {});
  Submit("7g.80gb");
  std::string node;
  for (Time t = 2; t < 5; ++t) EXPECT_EQ(ReshapeIn(Cycle(t), &node), nullptr);
  Register("b", {});  // not fixed: the 7g is cut there
  const pb::MigReshape* r = ReshapeIn(Cycle(6), &node);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(node, "b");
}

TEST(MigClusterYamlTest, FixedLayoutsAreCheckedAgainstTheNode) {
  auto bad_name = cluster::ParseClusterYaml(
      std::string(kCluster) + "mig: {fixed_layouts: {a: [3g.71gb]}}\n", "c.yaml");
  ASSERT_FALSE(bad_name.ok());
  EXPECT_NE(bad_name.status().message().find("'3g.71gb' is not a MIG profile of node 'a'"),
            std::string::npos)
      << bad_name.status().message();
  auto too_many = cluster::ParseClusterYaml(
      std::string(kCluster) + "mig: {fixed_layouts: {a: [4g.40gb, 4g.40gb]}}\n", "c.yaml");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("do not fit on one GPU"), std::string::npos);
  auto unknown = cluster::ParseClusterYaml(
      std::string(kCluster) + "mig: {fixed_layouts: {z: [7g.80gb]}}\n", "c.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no node 'z'"), std::string::npos);
  auto ok = cluster::ParseClusterYaml(
      std::string(kCluster) + "mig: {fixed_layouts: {\"[a,b]\": [3g.40gb, 4g.40gb]}}\n", "c.yaml");
  EXPECT_FALSE(ok.ok());  // a range is gpu-[00-03], not a list
  auto good = cluster::ParseClusterYaml(
      std::string(kCluster) + "mig: {fixed_layouts: {a: [3g.40gb, 4g.40gb]}}\n", "c.yaml");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->mig_fixed_layouts.count(0), 1u);
  EXPECT_EQ(cluster::MigLayoutText(good->mig_fixed_layouts.at(0).layout, 1), "4g.40gb@0,3g.40gb@4");
}

}  // namespace
}  // namespace hangar::controller
