// Topology discovered from the hardware, end to end (docs/topology-discovery.md): a real
// controller and four real agents on loopback, each with its own copy of the HGX H100 sysfs
// fixture (tests/data/topology/sysfs-hgx-h100) whose first HCA has a GUID of its own, and one
// ibnetdiscover dump of the fabric: node-1 and node-2 are cabled to switch sw-a, node-3 and node-4
// to sw-b. cluster.yaml declares node-3 under leaf-0 with node-1 and node-2. The controller must
// name node-3 (the API, an event, `hangar topology diff`), and `hangar topology discover --write`
// must put it under sw-b.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "local_cluster.h"

namespace hangar::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCluster = R"(
name: lab
node_defaults: {gpus: 8, gpu_model: H100-SXM-80GB, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}
fabric:
  spines:
    - name: spine-0
      leaves:
        - {name: leaf-0, nodes: [{name: "node-[1-3]"}]}
        - {name: leaf-1, nodes: [{name: "node-4"}]}
)";

// node-N's first HCA.
std::string HcaGuid(int n) { return "0002c90300b0000" + std::to_string(n); }

// ibnetdiscover's dump: sw-a with node-1 and node-2's HCAs, sw-b with node-3 and node-4's.
std::string FabricDump() {
  auto hca = [](int port, int n) {
    return "[" + std::to_string(port) + "]\t\"H-" + HcaGuid(n) + "\"[1](" + HcaGuid(n) +
           ")\t\t# \"node-" + std::to_string(n) + " mlx5_0\" lid " + std::to_string(20 + n) +
           " 4xNDR\n";
  };
  return "Switch\t64 \"S-b8599f0300cc0001\"\t\t# \"MF0;sw-a:MQM9700/U1\" enhanced port 0 lid 2\n" +
         hca(1, 1) + hca(2, 2) +
         "\nSwitch\t64 \"S-b8599f0300cc0002\"\t\t# \"MF0;sw-b:MQM9700/U1\" enhanced port 0 lid "
         "3\n" +
         hca(1, 3) + hca(2, 4);
}

std::pair<int, std::string> Shell(const std::string& command) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(TopologyDiscoveryIntegrationTest, DiffNamesTheNodeDeclaredOnTheWrongLeaf) {
  LocalCluster c(kCluster);
  const std::string dump = c.dir() + "/fabric.ibnetdiscover";
  std::ofstream(dump) << FabricDump();
  c.StartController();
  for (int n = 1; n <= 4; ++n) {
    // This node's sysfs: the fixture, with its first HCA's GUID its own.
    const std::string root = c.dir() + "/sysfs-node-" + std::to_string(n);
    fs::copy(std::string(HANGAR_SOURCE_DIR) + "/tests/data/topology/sysfs-hgx-h100", root,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    const std::string g = HcaGuid(n);
    std::ofstream(root + "/class/infiniband/mlx5_0/node_guid")
        << g.substr(0, 4) << ":" << g.substr(4, 4) << ":" << g.substr(8, 4) << ":"
        << g.substr(12, 4) << "\n";
    c.StartAgent("node-" + std::to_string(n), {"--sysfs-root", root, "--ibnetdiscover", dump});
  }
  ASSERT_TRUE(c.WaitForAgents(4));
  nlohmann::json diff;
  ASSERT_TRUE(LocalCluster::WaitFor(
      [&] {
        diff = c.Get("/v1/topology/diff");
        return diff.value("reported", 0) == 4;
      },
      10 * kSecond))
      << diff.dump();
  ASSERT_EQ(diff["disagreements"].size(), 1u) << diff.dump();
  EXPECT_EQ(diff["disagreements"][0]["node"], "node-3");
  const std::string want =
      "node-3: declared on leaf-0, but its IB port mlx5_0/1 reports switch 0xb8599f0300cc0002 "
      "(sw-b), which leaf-1's other nodes report; move it under leaf-1 in cluster.yaml or fix its "
      "cabling";
  EXPECT_EQ(diff["disagreements"][0]["message"], want);

  // The node's report as its agent sent it: GPU 0's nearest NIC from the fixture's PCI tree.
  auto found = c.Get("/v1/topology/discovered");
  EXPECT_EQ(found["nodes"]["node-2"]["gpus"][0]["nearest_nic"], "mlx5_0") << found.dump();
  EXPECT_EQ(found["nodes"]["node-2"]["ib_ports"][0]["switch_name"], "sw-a");

  // An event for node-3 (the state judges new reports once a second), once.
  nlohmann::json events;
  auto told = [&] {
    events = c.Get("/v1/events?subject=node/node-3&limit=1000");
    int n = 0;
    for (const auto& e : events["events"]) n += e.value("message", "") == want;
    return n;
  };
  EXPECT_TRUE(LocalCluster::WaitFor([&] { return told() > 0; }, 10 * kSecond)) << events.dump();

  const std::string server = " --server http://127.0.0.1:" + std::to_string(c.api_port());
  auto [rc, out] = Shell(std::string(HANGAR_BINARY) + " topology diff" + server);
  EXPECT_EQ(told(), 1) << events.dump();
  EXPECT_EQ(rc, 1) << out;
  EXPECT_EQ(out, want + "\n");

  const std::string cluster = c.dir() + "/declared.yaml", written = c.dir() + "/discovered.yaml";
  std::ofstream(cluster) << kCluster;
  auto [wrc, wout] = Shell(std::string(HANGAR_BINARY) + " topology discover --write " + written +
                           " --cluster " + cluster + server);
  ASSERT_EQ(wrc, 0) << wout;
  EXPECT_TRUE(Contains(wout, "wrote " + written + ": 4 nodes under 2 leaves")) << wout;
  const std::string yaml = ReadFile(written);
  EXPECT_TRUE(Contains(yaml, "name: \"sw-a\"")) << yaml;
  EXPECT_TRUE(Contains(yaml, "\"node-[1-2]\"")) << yaml;
  EXPECT_TRUE(Contains(yaml, "\"node-[3-4]\"")) << yaml;
  EXPECT_TRUE(Contains(yaml, "node_defaults:")) << yaml;
}

}  // namespace
}  // namespace hangar::testing
