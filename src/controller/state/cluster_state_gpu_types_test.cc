// cluster.yaml's gpu_types at submission: a Slurm GPU type in gpu_models becomes the cluster's
// models in the stored spec, and an unknown one is refused naming the types the cluster knows.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "controller/state/cluster_state.h"

namespace hangar::controller {
namespace {

TEST(GpuTypesStateTest, ATypeIsStoredAsTheModelsItMeansAndAnUnknownOneIsRefused) {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: NVIDIA A100-SXM4-80GB, gpu_memory: 80Gi, cpu: 64, "
      "memory: 512Gi}\n"
      "nodes: [{name: a}]\n"
      "gpu_types: {a100: NVIDIA A100-SXM4-80GB}\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  ControllerOptions o;
  o.require_validation = false;
  o.gpu_types = f->gpu_types;
  ClusterState state(f->topology, o, sched::Scheduler::Create({}).value());
  auto submit = [&](const std::string& type) {
    auto spec = job::ParseJobSpec(
        "name: t\ntasks: [{gpus: 1, gpu_models: [" + type + "], command: [x]}]\n", "j.yaml");
    EXPECT_TRUE(spec.ok());
    Effects fx;
    return state.Submit(*spec, 1, &fx);
  };
  auto id = submit("A100");
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(state.GetJob(*id)->spec["tasks"][0]["gpu_models"],
            nlohmann::json({"NVIDIA A100-SXM4-80GB"}));
  auto bad = submit("l40s");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(
                "asks for GPU type 'l40s', which this cluster has neither as a model nor as "
                "a GPU type; its GPU types (cluster.yaml's gpu_types) are: a100"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace hangar::controller
