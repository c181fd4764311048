#include "cluster/preflight_yaml.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

constexpr const char* kNodes =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "nodes: [{name: \"n-[0-3]\"}]\n";

StatusOr<PreflightConfig> Preflight(const std::string& block) {
  const std::string text = std::string(kNodes) + block;
  // The whole file is checked as every loader checks it; then the block is read.
  HANGAR_RETURN_IF_ERROR(ParseClusterYaml(text, "c.yaml").status());
  YamlSource src("c.yaml");
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  return ParsePreflight(src, root["preflight"]);
}

TEST(PreflightYamlTest, AGangSizeWithABudgetABufferAndASlowShare) {
  auto c =
      Preflight("preflight: {min_nodes: 4, budget: 90s, allreduce_mib: 16, slow_fraction: 0.9}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->enabled());
  EXPECT_EQ(c->min_nodes, 4u);
  EXPECT_EQ(c->budget, 90 * kSecond);
  EXPECT_EQ(c->allreduce_mib, 16u);
  EXPECT_DOUBLE_EQ(c->slow_fraction, 0.9);
  auto defaults = Preflight("preflight: {min_nodes: 2}\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->budget, 60 * kSecond);
  EXPECT_EQ(defaults->allreduce_mib, 64u);
  EXPECT_FALSE(PreflightConfig{}.enabled());  // a file without the block checks no gang
}

TEST(PreflightYamlTest, MistakesNameTheLineAndWhatToWrite) {
  auto no_size = Preflight("preflight: {budget: 30s}\n");
  ASSERT_FALSE(no_size.ok());
  EXPECT_NE(no_size.status().message().find("c.yaml:3"), std::string::npos)
      << no_size.status().message();
  EXPECT_NE(no_size.status().message().find("min_nodes"), std::string::npos);
  auto long_budget = Preflight("preflight: {min_nodes: 2, budget: 1h}\n");
  ASSERT_FALSE(long_budget.ok());
  EXPECT_NE(long_budget.status().message().find("from 1s to 10m"), std::string::npos)
      << long_budget.status().message();
  auto bad_share = Preflight("preflight: {min_nodes: 2, slow_fraction: 1.5}\n");
  ASSERT_FALSE(bad_share.ok());
  EXPECT_NE(bad_share.status().message().find("between 0 and 1"), std::string::npos);
  auto typo = Preflight("preflight: {min_node: 2}\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("min_nodes"), std::string::npos)
      << typo.status().message();
}

// docs/cluster-format.md's example block, as a cluster file would carry it.
TEST(PreflightYamlTest, TheDocumentsExampleLoads) {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/docs/cluster-format.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  const size_t at = doc.find("```yaml\npreflight:");
  ASSERT_NE(at, std::string::npos);
  const std::string block = doc.substr(at + 8, doc.find("```", at + 8) - at - 8);
  auto c = Preflight(block);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->min_nodes, 2u);
  EXPECT_EQ(c->budget, 60 * kSecond);
}

}  // namespace
}  // namespace hangar::cluster
