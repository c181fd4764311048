#include "agent/topology_discovery.h"

#include <gtest/gtest.h>

#include "agent/gpu/fake_backend.h"
#include "common/time.h"

namespace hangar::agent {
namespace {

const std::string kData = std::string(HANGAR_SOURCE_DIR) + "/tests/data/topology/";
const std::string kSysfs = kData + "sysfs-hgx-h100";

TopologyDiscoveryOptions FixtureOptions() {
  TopologyDiscoveryOptions o;
  o.ib_root = kSysfs + "/class/infiniband";
  o.pci_root = kSysfs + "/bus/pci/devices";
  o.ibnetdiscover = kData + "two-pod.ibnetdiscover";
  return o;
}

pb::DiscoveredTopology Discover(const FakeGpuOptions& fake, const TopologyDiscoveryOptions& o) {
  ManualClock clock(0);
  auto backend = MakeFakeBackend(fake, "gpu-005", &clock);
  EXPECT_TRUE(backend.ok()) << backend.status().message();
  auto gpus = (*backend)->Discover();
  EXPECT_TRUE(gpus.ok());
  return DiscoverTopology(o, *gpus, (*backend)->DiscoverNvlinks());
}

// The fixture's HGX H100 node (tests/data/topology/sysfs-hgx-h100/README.md) with the fake
// backend's eight GPUs, which sit at the fixture's GPU addresses.
TEST(TopologyDiscoveryTest, ReadsTheFixturesPortsAffinityAndSwitch) {
  FakeGpuOptions fake;
  fake.numa_nodes = 1;  // the backend says 0 for every GPU; sysfs knows better
  const pb::DiscoveredTopology d = Discover(fake, FixtureOptions());
  ASSERT_EQ(d.ib_ports_size(), 8);
  const pb::DiscoveredIbPort& p = d.ib_ports(0);
  EXPECT_EQ(p.device(), "mlx5_0");
  EXPECT_EQ(p.port(), 1u);
  EXPECT_EQ(p.node_guid(), "0x0002c90300a1000e");
  EXPECT_EQ(p.port_guid(), "0x0002c90300a1000f");
  EXPECT_EQ(p.lid(), 16u);
  EXPECT_EQ(p.link_layer(), "InfiniBand");
  EXPECT_EQ(p.pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(p.numa_node(), 0);
  // gpu-005's HCA-1 in the two-pod dump: cabled to leaf-a2's port 1.
  EXPECT_EQ(p.switch_guid(), "0xb8599f0300aa0001");
  EXPECT_EQ(p.switch_name(), "leaf-a2");
  EXPECT_EQ(p.switch_port(), 1u);
  EXPECT_EQ(d.ib_ports(7).numa_node(), 1);
  EXPECT_EQ(d.ib_ports(7).switch_guid(), "");  // a rail the dump does not describe
  ASSERT_EQ(d.gpus_size(), 8);
  for (int i = 0; i < 8; ++i) {
    const pb::DiscoveredGpu& g = d.gpus(i);
    EXPECT_EQ(g.numa_node(), i < 4 ? 0 : 1) << "GPU " << i;
    EXPECT_EQ(g.nearest_nic(), "mlx5_" + std::to_string(i)) << "GPU " << i;
    EXPECT_EQ(g.nic_affinity(), "pcie-switch") << "GPU " << i;
    EXPECT_EQ(g.nvlink_peers_size(), 7);  // an HGX board: every other GPU over NVSwitch
    EXPECT_EQ(g.nvlinks_to_switch(), 18u);
    EXPECT_EQ(g.fabric_state(), "not_supported");
  }
  bool noted = false;
  for (const auto& n : d.notes()) noted |= n.find("mlx5_7/1") != std::string::npos;
  EXPECT_TRUE(noted) << "a port missing from the dump is said in the notes";
}

// The fake backend's NVLink configuration: bridged pairs and an NVL72-class fabric clique.
TEST(TopologyDiscoveryTest, NvlinkPairsAndFabricCliqueFromTheFakeBackend) {
  FakeGpuOptions fake;
  fake.count = 4;
  fake.nvlink = "pairs";
  fake.fabric_cluster_uuid = "6f1c0e2a-0000-4000-8000-000000000001";
  fake.fabric_clique_id = 3;
  const pb::DiscoveredTopology d = Discover(fake, FixtureOptions());
  ASSERT_EQ(d.gpus_size(), 4);
  ASSERT_EQ(d.gpus(2).nvlink_peers_size(), 1);
  EXPECT_EQ(d.gpus(2).nvlink_peers(0), 3u);
  EXPECT_EQ(d.gpus(2).nvlinks_to_switch(), 0u);
  EXPECT_EQ(d.gpus(2).fabric_state(), "completed");
  EXPECT_EQ(d.gpus(2).fabric_cluster_uuid(), "6f1c0e2a-0000-4000-8000-000000000001");
  EXPECT_EQ(d.gpus(2).fabric_clique_id(), 3u);
  fake.nvlink = "rings";
  ManualClock clock(0);
  EXPECT_FALSE(MakeFakeBackend(fake, "n", &clock).ok());
}

TEST(TopologyDiscoveryTest, WithoutADumpOrDevicesTheNotesSaySo) {
  TopologyDiscoveryOptions o = FixtureOptions();
  o.ibnetdiscover.clear();
  FakeGpuOptions fake;
  pb::DiscoveredTopology d = Discover(fake, o);
  EXPECT_EQ(d.ib_ports(0).switch_guid(), "");
  ASSERT_GE(d.notes_size(), 1);
  EXPECT_NE(d.notes(0).find("--ibnetdiscover"), std::string::npos) << d.notes(0);
  o.ib_root = kSysfs + "/no-such-folder";
  d = Discover(fake, o);
  EXPECT_EQ(d.ib_ports_size(), 0);
  EXPECT_EQ(d.gpus(0).nic_affinity(), "none");
  o = FixtureOptions();
  o.ibnetdiscover = kData + "no-such-dump";
  d = Discover(fake, o);
  ASSERT_GE(d.notes_size(), 1);
  EXPECT_NE(d.notes(0).find("cannot read the ibnetdiscover dump"), std::string::npos);
}

}  // namespace
}  // namespace hangar::agent
