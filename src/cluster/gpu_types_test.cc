#include "cluster/gpu_types.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

constexpr const char* kNodes =
    "nodes:\n"
    "  - {name: a, gpus: 8, gpu_model: A100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "  - {name: b, gpus: 4, gpu_model: L40S-48GB, gpu_memory: 48Gi, cpu: 64, memory: 512Gi}\n";

TEST(GpuTypesTest, MapsSlurmTypeNamesWithoutRegardToCase) {
  auto f = ParseClusterYaml(
      std::string(kNodes) + "gpu_types: {A100: A100-SXM-80GB, l40s: [L40S-48GB]}\n", "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->gpu_types.ModelsOf("a100"), (std::vector<std::string>{"A100-SXM-80GB"}));
  EXPECT_EQ(f->gpu_types.ModelsOf("L40S"), (std::vector<std::string>{"L40S-48GB"}));
  EXPECT_FALSE(f->gpu_types.ModelsOf("h100"));
  EXPECT_EQ(f->gpu_types.Names(), "a100, l40s");
  auto none = ParseClusterYaml(kNodes, "c.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->gpu_types.empty());
  EXPECT_EQ(none->gpu_types.Names(), "none");
}

TEST(GpuTypesTest, RefusesAModelNoNodeHasAndATypeGivenTwiceWithTheLine) {
  auto f = ParseClusterYaml(std::string(kNodes) + "gpu_types:\n  a100: A100-40GB\n", "c.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(
      f.status().message(),
      "c.yaml:5: gpu_types.a100: 'A100-40GB' is not the gpu_model of any node; the models are: "
      "A100-SXM-80GB, L40S-48GB");
  f = ParseClusterYaml(
      std::string(kNodes) + "gpu_types:\n  a100: A100-SXM-80GB\n  A100: A100-SXM-80GB\n", "c.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("c.yaml:6: gpu_types: 'A100' is given twice"),
            std::string::npos)
      << f.status().message();
  f = ParseClusterYaml(std::string(kNodes) + "gpu_types: [a100]\n", "c.yaml");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("gpu_types must be a map"), std::string::npos)
      << f.status().message();
}

}  // namespace
}  // namespace hangar::cluster
