#include "cluster/topology_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cluster/cluster_yaml.h"

namespace hangar::cluster {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(HANGAR_SOURCE_DIR) + "/tests/data/topology/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The two-pod fabric every fixture describes (tests/data/topology/README.md).
std::map<std::string, std::pair<std::string, std::string>> TwoPods() {
  std::map<std::string, std::pair<std::string, std::string>> want;
  for (int i = 1; i <= 16; ++i) {
    char host[16];
    std::snprintf(host, sizeof host, "gpu-%03d", i);
    const char pod = i <= 8 ? 'a' : 'b';
    const int leaf = (i - 1) / 4 % 2 + 1;
    want[host] = {std::string("leaf-") + pod + std::to_string(leaf),
                  std::string("spine-") + pod + "1"};
  }
  return want;
}

class TopologyImportTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TopologyImportTest, EachImporterReproducesTheKnownFabric) {
  const auto [format, file] = GetParam();
  auto f = ImportFabric(format, Fixture(file), file);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->NumHosts(), 16u);
  EXPECT_EQ(f->Placement(), TwoPods());
  ASSERT_EQ(f->spines.size(), 2u);
  EXPECT_EQ(f->spines[0].leaves.size(), 2u);
  // What it writes is a cluster file the controller loads, with the same tree.
  auto yaml = FabricYaml(*f);
  ASSERT_TRUE(yaml.ok());
  auto c = ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 1Ti}\n" + *yaml,
      "imported.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString() << "\n" << *yaml;
  EXPECT_TRUE(DiffFabric(*c->topology, *f).empty());
  EXPECT_EQ(c->topology->leaves().size(), 4u);
  EXPECT_EQ(c->topology->spines().size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Formats, TopologyImportTest,
                         ::testing::Values(std::make_pair("slurm", "two-pod.topology.conf"),
                                           std::make_pair("ibnetdiscover", "two-pod.ibnetdiscover"),
                                           std::make_pair("csv", "two-pod.csv")));

TEST(TopologyDiffTest, NamesANodeDeclaredOnTheWrongLeaf) {
  auto f = ImportFabric("csv", Fixture("two-pod.csv"), "two-pod.csv");
  ASSERT_TRUE(f.ok());
  // Declared with other names, and gpu-005 under the first leaf although it is cabled to the
  // second.
  auto c = ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 1Ti}\n"
      "fabric:\n  spines:\n"
      "    - name: pod-a\n      leaves:\n"
      "        - {name: rack-1, nodes: [{name: \"gpu-[001-005]\"}]}\n"
      "        - {name: rack-2, nodes: [{name: \"gpu-[006-008]\"}]}\n"
      "    - name: pod-b\n      leaves:\n"
      "        - {name: rack-3, nodes: [{name: \"gpu-[009-012]\"}]}\n"
      "        - {name: rack-4, nodes: [{name: \"gpu-[013-017]\"}]}\n",
      "cluster.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::string> diff = DiffFabric(*c->topology, *f);
  ASSERT_EQ(diff.size(), 2u);
  EXPECT_EQ(diff[0],
            "node gpu-005 is on the wrong leaf: cluster.yaml declares it under rack-1 (the "
            "fabric's leaf-a1), but it is "
            "cabled to leaf-a2; move it in cluster.yaml or fix its cabling");
  EXPECT_EQ(diff[1],
            "node gpu-017 is in cluster.yaml (leaf rack-4) but no switch of the fabric has it");
}

TEST(TopologyImportTest, AnExistingClusterFileKeepsItsSettingsAndNodeFields) {
  auto f = ImportFabric("csv", "host,leaf,spine\nn-1,l1,s1\nn-2,l1,s1\nn-3,l2,s1\n", "hosts.csv");
  ASSERT_TRUE(f.ok());
  std::vector<std::string> missing;
  auto yaml = FabricYaml(
      *f,
      "name: lab\n"
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 1Ti}\n"
      "nodes: [{name: \"n-[1-2]\", rack: r1, labels: {pool: a}}]\n",
      &missing);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(missing, std::vector<std::string>{"n-3"});
  auto c = ParseClusterYaml(*yaml, "out.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString() << "\n" << *yaml;
  EXPECT_EQ(c->topology->name(), "lab");
  EXPECT_EQ(c->topology->nodes()[*c->topology->FindNode("n-2")].rack, "r1");
  EXPECT_EQ(c->topology->leaves()[c->topology->nodes()[*c->topology->FindNode("n-3")].leaf].name,
            "l2");
}

TEST(TopologyImportTest, BadInputSaysWhereAndWhat) {
  EXPECT_EQ(ImportFabric("slurm", "BlockName=b1 Nodes=a[1-2]\n", "t.conf").status().message(),
            "t.conf:1: expected SwitchName=NAME with Nodes= or Switches= (topology/tree); a "
            "topology/block file "
            "(BlockName=) is not read");
  EXPECT_EQ(ImportFabric("slurm", "SwitchName=s Switches=x\n", "t.conf").status().message(),
            "t.conf:1: switch 's' lists 'x', which no SwitchName= line declares");
  EXPECT_EQ(ImportFabric("csv", "a,l1\na,l2\n", "h.csv").status().message(),
            "h.csv:2: host 'a' is listed twice");
  EXPECT_EQ(ImportFabric("lldp", "", "x").status().message(),
            "unknown topology format 'lldp'; use slurm (topology.conf), ibnetdiscover or csv");
}

}  // namespace
}  // namespace hangar::cluster
