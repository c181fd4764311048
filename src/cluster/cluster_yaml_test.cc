#include "cluster/cluster_yaml.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

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
)",
                            "lab.yaml");
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
)",
                            "f.yaml");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->topology->leaves().size(), 2u);
  EXPECT_EQ(f->topology->nodes()[1].name, "a-01");

  auto ft = ParseClusterYaml(R"(
node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 96, memory: 1Ti}
fat_tree: {spines: 2, leaves_per_spine: 3, nodes_per_leaf: 4, racks_per_leaf: 2}
)",
                             "ft.yaml");
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
      {"nodes:\n  - name: a\n    gpus: 8\n    cpu: 4\n    memory: 1Gi\n",
       "c.yaml:2: node 'a' has GPUs but no gpu_model"},
      {"nodes:\n  - name: a\n    gpus: lots\n", "c.yaml:3: 'gpus' must be a whole number"},
      {"nodes:\n  - name: a\n    gpu: 8\n", "c.yaml:3: unknown field 'gpu' in a node"},
      {"nodes:\n  - name: a\n    cpu: 4\n    memory: 4Gb2\n", "c.yaml:4: memory:"},
      {"name: x\n", "declare the nodes in exactly one of"},
      {"nodes: [\n", "c.yaml:2"},
      {"nodes:\n  - name: a-[5-2]\n    cpu: 1\n    memory: 1Gi\n",
       "c.yaml:2: 'a-[5-2]' is not a node range"},
      {"nodes:\n  - {name: a, cpu: 1, memory: 1Gi}\n  - {name: a, cpu: 1, memory: 1Gi}\n",
       "line 3: node 'a' is declared twice"},
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
  for (const char* name :
       {"lab-4.yaml", "fabric-32x8.yaml", "fat-tree-1024.yaml", "dev-4x8.yaml", "mig-2.yaml"}) {
    auto f = LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/" + name);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status().ToString();
  }
  auto big =
      LoadClusterFile(std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/fat-tree-1024.yaml");
  EXPECT_EQ(big->topology->nodes().size(), 1024u);
  EXPECT_EQ(big->topology->total_gpus(), 8192);
}

}  // namespace
}  // namespace hangar::cluster

namespace hangar::cluster {
namespace {

TEST(ClusterYamlDataTest, ReadsTheDataSectionAndRefusesBadValues) {
  const std::string nodes =
      "nodes: [{name: a, gpus: 1, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}]\n";
  auto f = ParseClusterYaml(
      nodes +
          "data: {network: 10.20.0.0/16, origin_readers: 2, chunk_size: 4Mi, fanout: 4, "
          "origin_bandwidth: 50Mi, peer_bandwidth: 2Gi}\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->data.network, "10.20.0.0/16");
  EXPECT_EQ(f->data.origin_readers, 2);
  EXPECT_EQ(f->data.chunk_bytes, 4ll << 20);
  EXPECT_EQ(f->data.fanout, 4);
  EXPECT_EQ(f->data.origin_bytes_per_s, 50ll << 20);
  EXPECT_EQ(f->data.peer_bytes_per_s, 2ll << 30);
  EXPECT_TRUE(f->data.file_roots.empty())
      << "no file:// sources unless the cluster names their folders";
  auto roots = ParseClusterYaml(nodes + "data: {file_roots: [/lustre/, /data]}\n", "c.yaml");
  ASSERT_TRUE(roots.ok()) << roots.status().message();
  EXPECT_EQ(roots->data.file_roots, (std::vector<std::string>{"/lustre", "/data"}));
  auto relative = ParseClusterYaml(nodes + "data: {file_roots: [data]}\n", "c.yaml");
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("data.file_roots: 'data' is not an absolute path"),
            std::string::npos)
      << relative.status().message();
  auto bad = ParseClusterYaml(nodes + "data: {network: 10.20.0.0}\n", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a CIDR block"), std::string::npos);
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {chunk_size: lots}\n", "c.yaml").ok());
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {origin_readers: 0}\n", "c.yaml").ok());
  EXPECT_FALSE(ParseClusterYaml(nodes + "data: {fan_out: 2}\n", "c.yaml").ok());
}

// issue 16 item 7: where nodes sit on the management and data networks.
// Found by fuzz/cluster_yaml_fuzz.cc: a fabric without spines, or a spine without leaves, threw
// yaml-cpp's InvalidNode out of the parser (the controller ended with "terminate called").
TEST(ClusterYamlTest, AFabricMissingSpinesOrLeavesIsAnErrorNotAnException) {
  const char* defaults =
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 96, memory: 1Ti}\n";
  auto no_spines = ParseClusterYaml(std::string(defaults) + "fabric: {}\n", "f.yaml");
  ASSERT_FALSE(no_spines.ok());
  EXPECT_NE(no_spines.status().message().find("fabric.spines must be a non-empty list"),
            std::string::npos)
      << no_spines.status().message();
  auto no_leaves =
      ParseClusterYaml(std::string(defaults) + "fabric:\n  spines:\n    - name: s0\n", "f.yaml");
  ASSERT_FALSE(no_leaves.ok());
  EXPECT_NE(
      no_leaves.status().message().find("f.yaml:4: spine 's0' needs a non-empty list of leaves"),
      std::string::npos)
      << no_leaves.status().message();
}

TEST(ClusterYamlNetworksTest, ReadsNodeAddressesAndDataInterfaces) {
  auto f = ParseClusterYaml(
      "networks: {management: 10.77.0.0/24}\n"
      "node_defaults: {gpus: 4, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi, "
      "data_interfaces: [ib0, {netdev: ib1, hca: mlx5_1}]}\n"
      "nodes:\n"
      "  - {name: 'g[1-3]', management_address: '10.77.0.[11-13]', data_address: "
      "'10.78.0.[21-23]'}\n"
      "  - {name: x, management_address: 10.77.0.9, data_interfaces: [{hca: mlx5_0}]}\n",
      "c.yaml");
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->management_network, "10.77.0.0/24");
  const auto& nodes = f->topology->nodes();
  EXPECT_EQ(nodes[2].networks.management_address, "10.77.0.13");
  EXPECT_EQ(nodes[2].networks.data_address, "10.78.0.23");
  ASSERT_EQ(nodes[0].networks.data_interfaces.size(), 2u);
  EXPECT_EQ(nodes[0].networks.data_interfaces[0], (DataInterface{"ib0", ""}));
  EXPECT_EQ(nodes[0].networks.data_interfaces[1], (DataInterface{"ib1", "mlx5_1"}));
  EXPECT_EQ(f->topology->gpus()[3].rail, 1) << "two interfaces: two rails";
  EXPECT_EQ(nodes[3].networks.data_address, "");
  EXPECT_EQ(f->topology->gpus()[nodes[3].first_gpu + 3].rail, 0) << "one interface: one rail";
}

// docs/networks.md's example is examples/clusters/networks-16x8.yaml, and loads.
TEST(ClusterYamlNetworksTest, TheDocsExampleIsTheShippedOneAndLoads) {
  std::ifstream doc_in(std::string(HANGAR_SOURCE_DIR) + "/docs/networks.md");
  std::stringstream doc;
  doc << doc_in.rdbuf();
  const std::string text = doc.str();
  const size_t start = text.find("```yaml\n");
  ASSERT_NE(start, std::string::npos);
  const size_t end = text.find("```", start + 8);
  std::string block = text.substr(start + 8, end - start - 8);
  block.replace(block.find("                  # examples/clusters/networks-16x8.yaml"), 56, "");
  const std::string path = std::string(HANGAR_SOURCE_DIR) + "/examples/clusters/networks-16x8.yaml";
  std::ifstream file_in(path);
  std::stringstream file;
  file << file_in.rdbuf();
  EXPECT_EQ(block, file.str());
  auto f = LoadClusterFile(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  const auto& t = *f->topology;
  ASSERT_EQ(t.nodes().size(), 16u);
  EXPECT_EQ(t.nodes()[15].networks.management_address, "10.77.0.26");
  EXPECT_EQ(t.nodes()[15].networks.data_address, "10.78.0.26");
  EXPECT_EQ(t.nodes()[15].networks.data_interfaces.size(), 8u);
  EXPECT_EQ(t.gpus()[t.nodes()[15].first_gpu + 7].rail, 7);
}

TEST(ClusterYamlNetworksTest, RefusesWhatWouldMixTheNetworks) {
  const std::string d =
      "node_defaults: {gpus: 2, gpu_model: H100, gpu_memory: 80Gi, cpu: 8, memory: 64Gi}\n";
  auto error = [&](const std::string& yaml) {
    auto f = ParseClusterYaml(d + yaml, "c.yaml");
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_EQ(error("networks: {management: 10.77.0.0}\nnodes: [{name: a}]\n"),
            "c.yaml:2: networks.management '10.77.0.0' is not a CIDR block like 10.77.0.0/24 or "
            "fd00::/64");
  EXPECT_EQ(error("networks: {management: 10.77.0.0/24}\nnodes: [{name: a, management_address: "
                  "10.78.0.1}]\n"),
            "c.yaml:3: node 'a': management_address 10.78.0.1 is outside networks.management "
            "10.77.0.0/24; give it the "
            "node's address on that network");
  EXPECT_EQ(
      error("nodes: [{name: a, management_address: 10.77.0.1}, {name: b, management_address: "
            "10.77.0.1}]\n"),
      "c.yaml:2: node 'b': management_address 10.77.0.1 is node 'a''s too; each node has its own");
  EXPECT_EQ(error("nodes: [{name: 'a[1-3]', management_address: '10.77.0.[1-2]'}]\n"),
            "c.yaml:2: management_address '10.77.0.[1-2]' gives 2 address(es) for the 3 node(s) of "
            "'a[1-3]'; give a "
            "range as long as the name's, e.g. 10.77.0.[11-26] for gpu-[01-16]");
  EXPECT_EQ(error("nodes: [{name: a, management_address: head-1}]\n"),
            "c.yaml:2: management_address 'head-1' is not an IP address (e.g. 10.77.0.11 or "
            "fd00::11); the controller "
            "checks agents' connections against it");
  auto defaults = ParseClusterYaml(
      "node_defaults: {management_address: 10.0.0.1}\nnodes: [{name: a}]\n", "c.yaml");
  ASSERT_FALSE(defaults.ok());
  EXPECT_NE(defaults.status().message().find(
                "management_address belongs on a node entry (each node has its own), not in "
                "node_defaults"),
            std::string::npos)
      << defaults.status().message();
  EXPECT_EQ(error("nodes: [{name: a, rails: 4, data_interfaces: [ib0, ib1]}]\n"),
            "c.yaml:2: node 'a': rails is 4 but data_interfaces lists 2; give one data interface "
            "per rail");
  EXPECT_NE(
      error("nodes: [{name: a, data_interfaces: ['ib0,ib1']}]\n").find("is not a device name"),
      std::string::npos);
  EXPECT_NE(error("nodes: [{name: a, data_interfaces: [{}]}]\n").find("needs a netdev or an hca"),
            std::string::npos);
  EXPECT_NE(error("nodes: [{name: a, data_interfaces: []}]\n").find("must list 1 to 64 interfaces"),
            std::string::npos);
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
      "nodes: [{name: \"g-[0-1]\", gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 192, memory: "
      "2Ti}]\n";
  auto ok = ParseClusterYaml(
      nodes + "gpu_models:\n  H100: {max_cpu_per_gpu: 32, default_memory_per_gpu: 100Gi}\n",
      "c.yaml");
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
      {"gpu_models: {A100: {}}",
       "c.yaml:2: gpu_models: 'A100' is not the gpu_model of any node; the models are: H100"},
      {"gpu_models: {H100: {max_cpus_per_gpu: 8}}", "unknown field 'max_cpus_per_gpu'"},
      {"gpu_models: {H100: {max_cpu_per_gpu: lots}}",
       "max_cpu_per_gpu: 'lots' is not a CPU count like 8 or 7500m"},
      {"gpu_models: {H100: {max_memory_per_gpu: 0}}",
       "max_memory_per_gpu: '0' is not a size like 64Gi"},
      {"gpu_models: {H100: {max_cpu_per_gpu: 16}}",
       "the default CPU per GPU (24 cores, derived from the nodes) is above max_cpu_per_gpu (16 "
       "cores)"},
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
