#include "cluster/spares_yaml.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

// Two leaves of three nodes: a-0..a-2 in l0, b-0..b-2 in l1.
constexpr const char* kFabric =
    "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
    "fabric:\n"
    "  spines:\n"
    "    - name: s0\n"
    "      leaves:\n"
    "        - {name: l0, nodes: [{name: \"a-[0-2]\"}]}\n"
    "        - {name: l1, nodes: [{name: \"b-[0-2]\"}]}\n";

StatusOr<SparesConfig> Spares(const std::string& block) {
  const std::string text = std::string(kFabric) + block;
  auto file = ParseClusterYaml(text, "c.yaml");
  if (!file.ok()) return file.status();
  YamlSource src("c.yaml");
  HANGAR_ASSIGN_OR_RETURN(YAML::Node root, src.Parse(text));
  return ParseSpares(src, root["spares"], *file->topology);
}

TEST(SparesYamlTest, ACountPerDomainOrANamedPool) {
  auto per_leaf = Spares("spares: {per: leaf, count: 1}\n");
  ASSERT_TRUE(per_leaf.ok()) << per_leaf.status().message();
  EXPECT_EQ(per_leaf->per, Level::kLeaf);
  EXPECT_EQ(per_leaf->count, 1u);
  EXPECT_TRUE(per_leaf->nodes.empty());
  auto per_spine = Spares("spares: {per: spine, count: 2}\n");
  ASSERT_TRUE(per_spine.ok()) << per_spine.status().message();
  EXPECT_EQ(per_spine->per, Level::kSpine);
  auto pool = Spares("spares: {nodes: [b-2, \"a-[1-2]\"]}\n");
  ASSERT_TRUE(pool.ok()) << pool.status().message();
  EXPECT_EQ(pool->nodes, (std::vector<uint32_t>{1, 2, 5}));
  EXPECT_TRUE(pool->enabled());
  EXPECT_FALSE(SparesConfig{}.enabled());
}

TEST(SparesYamlTest, MistakesSayWhatToWrite) {
  auto expect = [](const std::string& block, const std::string& words) {
    auto c = Spares(block);
    ASSERT_FALSE(c.ok()) << block;
    EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().message();
  };
  expect("spares: {per: leaf, count: 3}\n",
         "spares.count 3 per leaf leaves no node for work in l0 (3 nodes)");
  expect("spares: {per: node, count: 1}\n", "spares.per must be leaf, spine or cluster");
  expect("spares: {nodes: [c-1]}\n", "spares.nodes: no node 'c-1' in this cluster");
  expect("spares: {nodes: [a-0], count: 1}\n", "not both");
  expect("spares: {per: leaf}\n", "give a count per domain");
  expect("spares: {count: 1, hold: 2m}\n", "hold");
}

TEST(SparesYamlTest, TheClusterFileChecksTheBlock) {
  EXPECT_TRUE(ParseClusterYaml(std::string(kFabric) + "spares: {count: 1}\n", "c.yaml").ok());
  auto bad = ParseClusterYaml(std::string(kFabric) + "spares: {count: 9}\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("c.yaml:8: spares.count 9"), std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace hangar::cluster
