#include "job/gpu_type_names.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::job {
namespace {

class GpuTypeNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = cluster::ParseClusterYaml(
        "nodes:\n"
        "  - {name: a, gpus: 8, gpu_model: NVIDIA A100-SXM4-80GB, gpu_memory: 80Gi, cpu: 64, "
        "memory: 512Gi}\n"
        "  - {name: b, gpus: 4, gpu_model: L40S, gpu_memory: 48Gi, cpu: 64, memory: 512Gi}\n"
        "gpu_types: {a100: NVIDIA A100-SXM4-80GB, l40s: L40S}\n",
        "c.yaml");
    ASSERT_TRUE(f.ok()) << f.status().message();
    file_ = std::move(*f);
  }
  StatusOr<JobSpec> Resolve(const std::string& models) {
    auto spec = ParseJobSpec(
        "name: j\ntasks: [{gpus: 1, gpu_models: " + models + ", command: [x]}]\n", "j.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    HANGAR_RETURN_IF_ERROR(ResolveGpuTypes(file_.gpu_types, *file_.topology, &*spec));
    return *spec;
  }
  cluster::ClusterFile file_;
};

TEST_F(GpuTypeNamesTest, ATypeBecomesItsModelsAndAModelStaysItself) {
  auto s = Resolve("[A100]");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tasks[0].gpu_models, (std::vector<std::string>{"NVIDIA A100-SXM4-80GB"}));
  s = Resolve("[L40S, l40s]");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tasks[0].gpu_models, (std::vector<std::string>{"L40S"}));
  // Idempotent: a resolved spec resolves to itself.
  JobSpec again = *s;
  ASSERT_TRUE(ResolveGpuTypes(file_.gpu_types, *file_.topology, &again).ok());
  EXPECT_EQ(again.tasks[0].gpu_models, s->tasks[0].gpu_models);
}

TEST_F(GpuTypeNamesTest, AnUnknownTypeIsRefusedNamingTheKnownTypesAndModels) {
  auto s = Resolve("[h100]");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(
      s.status().message(),
      "task group 'main' asks for GPU type 'h100', which this cluster has neither as a model nor "
      "as a GPU "
      "type; its GPU types (cluster.yaml's gpu_types) are: a100, l40s; its models are: NVIDIA "
      "A100-SXM4-80GB, L40S; ask for one of them, or have an admin map the type in gpu_types");
  // Beside a known one, an unknown name is kept as written: the job may still run.
  s = Resolve("[a100, h100]");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tasks[0].gpu_models, (std::vector<std::string>{"NVIDIA A100-SXM4-80GB", "h100"}));
}

// A cluster that maps no GPU types keeps an unknown model as written: the job is accepted and
// waits as never placeable, with the reason in `hangar explain` (the scheduler's goldens).
TEST_F(GpuTypeNamesTest, WithoutGpuTypesAnUnknownModelIsKeptAsWritten) {
  file_.gpu_types = {};
  auto s = Resolve("[no-such-model]");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->tasks[0].gpu_models, (std::vector<std::string>{"no-such-model"}));
}

}  // namespace
}  // namespace hangar::job
