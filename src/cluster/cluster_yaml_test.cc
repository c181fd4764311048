#include "cluster/cluster_yaml.h"

#include <gtest/gtest.h>

namespace hangar::cluster {
namespace {

TEST(ClusterYamlTest, FlatNodesWithDefaultsAndRanges) {
  auto f = ParseClusterYaml(R"(
name: lab
node_defaults:
  gpus: 8
  gpu_model: H100-SXM-80GB
  gpu_memory: 80Gi
  cpu: 128
  memory: 1Ti
nodes:
  - name: gpu-[1-3]
    labels: {pool: train}
  - name: small
    gpus: 2
    cpu: 32
)", "lab.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const Topology& t = *f->topology;
  EXPECT_EQ(t.name(), "lab");
  ASSERT_EQ(t.nodes().size(), 4u);
  EXPECT_EQ(t.nodes()[0].name, "gpu-1");
  EXPECT_EQ(t.nodes()[3].num_gpus, 2);
  EXPECT_EQ(t.nodes()[3].milli_cpu, 32000);
  EXPECT_EQ(t.nodes()[0].memory_mib, 1024 * 1024);
  EXPECT_TRUE(t.HasLabel(1, "pool", "train"));
  EXPECT_FALSE(t.HasLabel(3, "pool", "train"));
  EXPECT_EQ(t.total_gpus(), 26);
}

TEST(ClusterYamlTest, FabricAndFatTree) {
  auto f = ParseClusterYaml(R"(
node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 96, memory: 1Ti}
fabric:
  spines:
    - name: s0
      leaves:
        - name: l0
          nodes: [{name: "a-[00-01]"}]
        - name: l1
          nodes: [{name: b}]
)", "f.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->topology->leaves().size(), 2u);
  EXPECT_EQ(f->topology->nodes()[1].name, "a-01");

  auto ft = ParseClusterYaml(R"(
node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 96, memory: 1Ti}
fat_tree: {spines: 2, leaves_per_spine: 3, nodes_per_leaf: 4, racks_per_leaf: 2}
)", "ft.yaml");
  ASSERT_TRUE(ft.ok()) << ft.status().ToString();
  const Topology& t = *ft->topology;
  EXPECT_EQ(t.nodes().size(), 24u);
  EXPECT_EQ(t.spines().size(), 2u);
  EXPECT_EQ(t.leaves().size(), 6u);
  EXPECT_EQ(t.nodes()[23].name, "node-0023");
  EXPECT_EQ(t.nodes()[2].rack, "rack-0-1");
}

TEST(ClusterYamlTest, ErrorsPointAtTheLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"nodes:\n  - name: a\n    gpus: 8\n    cpu: 4\n    memory: 1Gi\n", "c.yaml:2: node 'a' has GPUs but no gpu_model"},
      {"nodes:\n  - name: a\n    gpus: lots\n", "c.yaml:3: 'gpus' must be a whole number"},
      {"nodes:\n  - name: a\n    gpu: 8\n", "c.yaml:3: unknown field 'gpu' in a node"},
      {"nodes:\n  - name: a\n    cpu: 4\n    memory: 4Gb2\n", "c.yaml:4: memory:"},
      {"name: x\n", "declare the nodes in exactly one of"},
      {"nodes: [\n", "c.yaml:2"},
      {"nodes:\n  - name: a-[5-2]\n    cpu: 1\n    memory: 1Gi\n", "c.yaml:2: 'a-[5-2]' is not a node range"},
      {"nodes:\n  - {name: a, cpu: 1, memory: 1Gi}\n  - {name: a, cpu: 1, memory: 1Gi}\n", "line 3: node 'a' is declared twice"},
  };
  for (const auto& c : cases) {
    auto r = ParseClusterYaml(c.text, "c.yaml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << "got: " << r.status().message() << "\nwant: " << c.expect;
  }
  auto missing = LoadClusterFile("/nonexistent/cluster.yaml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(ClusterYamlTest, ShippedExamplesLoad) {
  for (const char* name : {"lab-4.yaml", "fabric-32x8.yaml", "fat-tree-1024.yaml", "dev-4x8.yaml"}) {
    auto f = LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/" + name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().ToString();
  }
  auto big = LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/fat-tree-1024.yaml");
  EXPECT_EQ(big->topology->nodes().size(), 1024u);
  EXPECT_EQ(big->topology->total_gpus(), 8192);
}

}  // namespace
}  // namespace hangar::cluster
