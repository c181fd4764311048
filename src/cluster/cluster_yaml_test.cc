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
  for (const char* name : {"lab-4.yaml", "fabric-32x8.yaml", "fat-tree-1024.yaml", "dev-4x8.yaml", "mig-2.yaml"}) {
    auto f = LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/" + name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().ToString();
  }
  auto big = LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/fat-tree-1024.yaml");
  EXPECT_EQ(big->topology->nodes().size(), 1024u);
  EXPECT_EQ(big->topology->total_gpus(), 8192);
}

}  // namespace
}  // namespace hangar::cluster

namespace hangar::cluster {
namespace {

TEST(ClusterYamlDataTest, ReadsTheDataSectionAndRefusesBadValues) {
  const std::string nodes = "nodes: [{name: a, gpus: 1, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}]\n";
  auto f = ParseClusterYaml(nodes + "data: {network: 10.20.0.0/16, origin_readers: 2, chunk_size: 4Mi, fanout: 4, "
                                    "origin_bandwidth: 50Mi, peer_bandwidth: 2Gi}\n",
                            "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->data.network, "10.20.0.0/16");
  EXPECT_EQ(f->data.origin_readers, 2);
  EXPECT_EQ(f->data.chunk_bytes, 4ll << 20);
  EXPECT_EQ(f->data.fanout, 4);
  EXPECT_EQ(f->data.origin_bytes_per_s, 50ll << 20);
  EXPECT_EQ(f->data.peer_bytes_per_s, 2ll << 30);
  auto bad = ParseClusterYaml(nodes + "data: {network: 10.20.0.0}\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a CIDR block"), std::string::npos);
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {chunk_size: lots}\n", "c.yaml").ok());
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {origin_readers: 0}\n", "c.yaml").ok());
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {fan_out: 2}\n", "c.yaml").ok());
}

TEST(ClusterYamlDataTest, AddressInNetwork) {
  EXPECT_TRUE(AddressInNetwork("10.20.3.4", "10.20.0.0/16"));
  EXPECT_FALSE(AddressInNetwork("10.21.3.4", "10.20.0.0/16"));
  EXPECT_FALSE(AddressInNetwork("fd00::1", "10.20.0.0/16"));
  EXPECT_TRUE(AddressInNetwork("fd00::1", "fd00::/8"));
  EXPECT_TRUE(AddressInNetwork("127.0.0.1", "127.0.0.0/8"));
  EXPECT_TRUE(AddressInNetwork("1.2.3.4", ""));
  EXPECT_TRUE(AddressInNetwork("1.2.3.4", "0.0.0.0/0"));
  EXPECT_FALSE(AddressInNetwork("10.20.0.1", "10.20.0.0/33"));
}

TEST(ClusterYamlTest, GpuModelsParseAndRefuseWhatCannotWork) {
  const std::string nodes =
      "nodes: [{name: \"g-[0-1]\", gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}]\n";
  auto ok = ParseClusterYaml(nodes + "gpu_models:\n  H100: {max_cpu_per_gpu: 32, default_memory_per_gpu: 100Gi}\n", "c.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->gpu_models.size(), 1u);
  EXPECT_EQ(ok->gpu_models[0].default_milli_cpu_per_gpu, 24000);  // 192 cores / 8 GPUs
  EXPECT_EQ(ok->gpu_models[0].max_milli_cpu_per_gpu, 32000);
  EXPECT_EQ(ok->gpu_models[0].default_memory_mib_per_gpu, 100 * 1024);
  EXPECT_FALSE(ok->gpu_models[0].memory_derived);
  auto empty = ParseClusterYaml(nodes + "gpu_models: {H100: {}}\n", "c.yaml");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->gpu_models[0].default_memory_mib_per_gpu, 256 * 1024);
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"gpu_models: {A100: {}}", "c.yaml:2: gpu_models: 'A100' is not the gpu_model of any node; the models are: H100"},
      {"gpu_models: {H100: {max_cpus_per_gpu: 8}}", "unknown field 'max_cpus_per_gpu'"},
      {"gpu_models: {H100: {max_cpu_per_gpu: lots}}", "max_cpu_per_gpu: 'lots' is not a CPU count like 8 or 7500m"},
      {"gpu_models: {H100: {max_memory_per_gpu: 0}}", "max_memory_per_gpu: '0' is not a size like 64Gi"},
      {"gpu_models: {H100: {max_cpu_per_gpu: 16}}",
       "the default CPU per GPU (24 cores, derived from the nodes) is above max_cpu_per_gpu (16 cores)"},
      {"gpu_models: {H100: {default_memory_per_gpu: 64Gi, max_memory_per_gpu: 32Gi}}",
       "the default memory per GPU (64Gi) is above max_memory_per_gpu (32Gi)"},
      {"gpu_models: [H100]", "gpu_models must be a map of model"},
  };
  for (const auto& c : cases) {
    auto f = ParseClusterYaml(nodes + c.text + "\n", "c.yaml");
    ASSERT_FALSE(f.ok()) << c.text;
    EXPECT_NE(f.status().message().find(c.expect), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace hangar::cluster
