// An agent's version at registration: within the skew policy it registers, outside it is refused.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "common/version.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

Status RegisterWith(const std::string& version) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\nnodes: "
      "[{name: a}]\n",
      "c.yaml");
  EXPECT_TRUE(f.ok());
  ClusterState st(f->topology, ControllerOptions{}, sched::Scheduler::Create({}).value());
  pb::Register r;
  r.mutable_inventory()->set_node("a");
  r.mutable_inventory()->set_agent_version(version);
  for (int i = 0; i < 8; ++i) r.mutable_inventory()->add_gpus()->set_index(i);
  Effects fx;
  return st.OnRegister(r, 1, &fx);
}

TEST(AgentSkewTest, AnAgentOutsideTheSkewPolicyIsRefusedAtRegistration) {
  const ReleaseVersion v = *ParseReleaseVersion(Version());
  auto text = [](int major, int minor) {
    return "hangar " + std::to_string(major) + "." + std::to_string(minor) + ".0";
  };
  EXPECT_TRUE(RegisterWith("hangar " + std::string(Version())).ok());
  if (v.minor > 0) {
    EXPECT_TRUE(RegisterWith(text(v.major, v.minor - 1)).ok());
  }
  Status newer = RegisterWith(text(v.major, v.minor + 1));
  EXPECT_EQ(newer.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(newer.message(),
            "node 'a' refused: the agent runs " + text(v.major, v.minor + 1) +
                ", this controller hangar " + std::string(Version()) +
                ": the agent is newer than its controller (the policy: a controller may be at "
                "most one minor version ahead of its agents, never behind; docs/operations.md, "
                "\"Versions and upgrades\"); upgrade the controller first");
  EXPECT_EQ(RegisterWith(text(v.major + 1, 0)).code(), StatusCode::kFailedPrecondition);
  if (v.minor > 1) {
    EXPECT_EQ(RegisterWith(text(v.major, v.minor - 2)).code(), StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace hangar::controller
