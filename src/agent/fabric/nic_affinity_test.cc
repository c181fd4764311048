#include "agent/fabric/nic_affinity.h"

#include <gtest/gtest.h>

#include "agent/fabric/fake_sysfs_test_util.h"

namespace hangar::agent {
namespace {

using testing::FakeSysfs;

TEST(NicAffinity, PureChoiceBySwitchThenNuma) {
  const std::string sw0 = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0";
  std::vector<PciEndpoint> gpus = {
      {"GPU 0", sw0 + "/0000:12:00.0/0000:18:00.0", 0},
      {"GPU 1", "/sys/devices/pci0000:20/0000:20:01.0/0000:28:00.0", 0},
      {"GPU 2", "/sys/devices/pci0000:90/0000:90:01.0/0000:98:00.0", 1},
      {"GPU 3", "/sys/devices/pci0000:a0/0000:a0:01.0/0000:a8:00.0", 3},
      {"GPU 4", "", 1},
  };
  std::vector<PciEndpoint> nics = {
      {"mlx5_0", "/sys/devices/pci0000:20/0000:20:02.0/0000:29:00.0", 0},  // same root complex only
      {"mlx5_1", sw0 + "/0000:12:01.0/0000:19:00.0", 0},                   // same switch as GPU 0
      {"mlx5_2", "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1},
  };
  auto c = BestNicPerGpu(gpus, nics);
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].nic, 1);
  EXPECT_EQ(c[0].affinity, NicAffinity::kPcieSwitch);
  EXPECT_EQ(c[1].nic, 0);  // a shared root complex is not a shared switch: NUMA decides
  EXPECT_EQ(c[1].affinity, NicAffinity::kNumaNode);
  EXPECT_EQ(c[2].nic, 2);
  EXPECT_EQ(c[2].affinity, NicAffinity::kNumaNode);
  EXPECT_EQ(c[3].nic, -1);
  EXPECT_EQ(c[3].affinity, NicAffinity::kNone);
  EXPECT_EQ(c[4].nic, 2);
  EXPECT_STREQ(NicAffinityName(c[0].affinity), "pcie-switch");
}

TEST(NicAffinity, DeeperSharedSwitchWins) {
  const std::string root = "/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0";
  std::vector<PciEndpoint> gpus = {{"GPU 0", root + "/0000:12:00.0/0000:13:00.0/0000:18:00.0", 0}};
  std::vector<PciEndpoint> nics = {
      {"far", root + "/0000:12:04.0/0000:1a:00.0", 0},
      {"near", root + "/0000:12:00.0/0000:13:01.0/0000:19:00.0", 1},
  };
  EXPECT_EQ(BestNicPerGpu(gpus, nics)[0].nic, 1);
}

TEST(NicAffinity, ResolvesPathsInAFakeSysfs) {
  FakeSysfs sys;
  sys.AddPci("pci0000:10/0000:10:01.0/0000:18:00.0", 0);
  auto gpu = ParsePciAddress("00000000:18:00.0");
  ASSERT_TRUE(gpu);
  EXPECT_EQ(ResolvePciPath(sys.pci_root(), *gpu),
            sys.devices("pci0000:10/0000:10:01.0/0000:18:00.0"));
  EXPECT_EQ(ResolvePciPath(sys.pci_root(), *ParsePciAddress("0000:99:00.0")), "");
}

}  // namespace
}  // namespace hangar::agent
