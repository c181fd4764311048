// NodeFacts: what Init finds of a node with fake GPUs and a fake /sys: the GPUs by index and by
// position, the inventory's hardware, and the NIC closest to each GPU.
#include "agent/node_facts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/fabric/fake_sysfs_test_util.h"
#include "agent/gpu/fake_backend.h"

namespace hangar::agent {
namespace {

using ::testing::HasSubstr;

class NodeFactsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeGpuOptions fake;
    fake.count = 2;
    auto backend = MakeFakeBackend(fake, "n1", SystemClock::Default());
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
  }
  TopologyDiscoveryOptions Where() const { return {sys_.ib_root(), sys_.pci_root(), ""}; }

  testing::FakeSysfs sys_;
  std::unique_ptr<GpuBackend> backend_;
  NodeFacts facts_;
};

TEST_F(NodeFactsTest, FindsTheGpusAndDescribesThemWithThePorts) {
  sys_.AddPci("pci0000:10/0000:10:01.0/0000:19:00.0", 0);
  sys_.AddIb("mlx5_0", "pci0000:10/0000:10:01.0/0000:19:00.0");
  ASSERT_TRUE(facts_.Discover(backend_.get(), Where(), "no cgroup: a test").ok());
  EXPECT_EQ(facts_.cgroup_status(), "no cgroup: a test");
  const pb::GpuInfo* one = facts_.GpuWithIndex(1);
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->index(), 1u);
  EXPECT_EQ(facts_.UuidAt(1), one->uuid());
  EXPECT_FALSE(facts_.UuidAt(0).empty());
  EXPECT_EQ(facts_.UuidAt(2), "") << "past the last GPU";
  EXPECT_EQ(facts_.GpuWithIndex(7), nullptr);
  pb::Inventory inv;
  facts_.Describe(&inv);
  ASSERT_EQ(inv.gpus_size(), 2);
  EXPECT_EQ(inv.gpus(0).uuid(), facts_.UuidAt(0));
  EXPECT_FALSE(inv.driver_version().empty());
  ASSERT_EQ(inv.nics_size(), 1);
  EXPECT_EQ(inv.nics(0).device(), "mlx5_0");
  EXPECT_EQ(facts_.discovered().gpus_size(), 2);
}

TEST_F(NodeFactsTest, NamesTheNicClosestToEachGpu) {
  // GPU 0 (bus 18) and the HCA (bus 19) behind one PCIe switch.
  sys_.AddPci("pci0000:10/0000:10:01.0/0000:18:00.0", 0);
  sys_.AddPci("pci0000:10/0000:10:01.0/0000:19:00.0", 0);
  sys_.AddIb("mlx5_0", "pci0000:10/0000:10:01.0/0000:19:00.0");
  ASSERT_TRUE(facts_.Discover(backend_.get(), Where(), "").ok());
  EXPECT_THAT(facts_.NicsForGpus(sys_.pci_root()), HasSubstr("GPU 0 -> mlx5_0 (pcie-switch)"));
}

TEST_F(NodeFactsTest, NoPortsNoNicLine) {
  ASSERT_TRUE(facts_.Discover(backend_.get(), Where(), "").ok());
  pb::Inventory inv;
  facts_.Describe(&inv);
  EXPECT_EQ(inv.nics_size(), 0);
  EXPECT_EQ(facts_.NicsForGpus(sys_.pci_root()), "");
}

// MigInstances::Init takes the MIG layouts out of the GPUs: the inventory no longer has them.
TEST_F(NodeFactsTest, WhatIsTakenOutOfTheGpusLeavesTheInventory) {
  ASSERT_TRUE(facts_.Discover(backend_.get(), Where(), "").ok());
  facts_.mutable_gpus()->at(0).add_mig_layout()->set_profile("1g.10gb");
  pb::Inventory before;
  facts_.Describe(&before);
  EXPECT_EQ(before.gpus(0).mig_layout_size(), 1);
  facts_.mutable_gpus()->at(0).clear_mig_layout();
  pb::Inventory after;
  facts_.Describe(&after);
  EXPECT_EQ(after.gpus(0).mig_layout_size(), 0);
}

}  // namespace
}  // namespace hangar::agent
