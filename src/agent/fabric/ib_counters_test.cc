#include "agent/fabric/ib_counters.h"

#include <gtest/gtest.h>

#include "agent/fabric/fake_sysfs_test_util.h"

namespace hangar::agent {
namespace {

using testing::FakeSysfs;

TEST(IbCounters, ReadsPortsCountersAndPlacement) {
  FakeSysfs sys;
  sys.AddPci("pci0000:10/0000:10:01.0/0000:19:00.0", 0);
  sys.AddPci("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  auto p = sys.AddIb("mlx5_0", "pci0000:10/0000:10:01.0/0000:19:00.0");
  FakeSysfs::Write(p / "counters/symbol_error", "3\n");
  FakeSysfs::Write(p / "counters/port_xmit_data", "123456789012\n");
  FakeSysfs::Write(p / "counters/link_downed", "0\n");
  FakeSysfs::Write(p / "counters/garbage", "N/A\n");
  FakeSysfs::Write(p / "hw_counters/rnr_nak_retry_err", "7\n");
  FakeSysfs::Write(p / "hw_counters/symbol_error", "999\n");  // counters/ wins
  auto p2 = sys.AddIb("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0", 1);
  sys.AddIb("mlx5_1", "pci0000:80/0000:80:01.0/0000:81:00.0", 2);
  FakeSysfs::Write(p2 / "state", "1: DOWN\n");

  auto ports = ReadIbPorts(sys.ib_root());
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  ASSERT_EQ(ports->size(), 3u);
  const pb::IbPortSample& a = (*ports)[0];
  EXPECT_EQ(a.device(), "mlx5_0");
  EXPECT_EQ(a.port(), 1u);
  EXPECT_EQ(a.state(), "4: ACTIVE");
  EXPECT_EQ(a.phys_state(), "5: LinkUp");
  EXPECT_EQ(a.rate(), "400 Gb/sec (4X NDR)");
  EXPECT_EQ(a.numa_node(), 0);
  EXPECT_EQ(a.pci_bus_id(), "0000:19:00.0");
  EXPECT_EQ(a.counters().at("symbol_error"), 3u);
  EXPECT_EQ(a.counters().at("port_xmit_data"), 123456789012u);
  EXPECT_EQ(a.counters().at("rnr_nak_retry_err"), 7u);
  EXPECT_EQ(a.counters().count("garbage"), 0u);
  EXPECT_EQ(a.counters().size(), 4u);
  EXPECT_EQ((*ports)[1].device(), "mlx5_1");
  EXPECT_EQ((*ports)[1].state(), "1: DOWN");
  EXPECT_EQ((*ports)[1].numa_node(), 1);
  EXPECT_EQ((*ports)[2].port(), 2u);
}

TEST(IbCounters, MissingRootMeansNoPorts) {
  auto ports = ReadIbPorts("/nonexistent/infiniband");
  ASSERT_TRUE(ports.ok());
  EXPECT_TRUE(ports->empty());
  auto file = ReadIbPorts("/proc/self/status");
  EXPECT_FALSE(file.ok());
}

TEST(CounterDelta, IncreasesResetsAndSaturation) {
  EXPECT_EQ(ComputeCounterChange(10, 15).delta, 5u);
  CounterChange reset = ComputeCounterChange(1000, 4);
  EXPECT_TRUE(reset.reset);
  EXPECT_EQ(reset.delta, 4u);
  CounterChange sat = ComputeCounterChange(65530, 65535, IbCounterMax("symbol_error"));
  EXPECT_EQ(sat.delta, 5u);
  EXPECT_TRUE(sat.saturated);
  EXPECT_FALSE(ComputeCounterChange(1, 2, IbCounterMax("port_xmit_data")).saturated);
  EXPECT_EQ(IbCounterMax("link_downed"), 255u);
  EXPECT_EQ(IbCounterMax("local_link_integrity_errors"), 15u);
  EXPECT_EQ(IbCounterMax("rnr_nak_retry_err"), UINT64_MAX);
}

TEST(CounterDelta, TracksEachCounterOfEachPort) {
  CounterDelta d;
  pb::IbPortSample s;
  s.set_device("mlx5_0");
  s.set_port(1);
  (*s.mutable_counters())["link_downed"] = 2;
  (*s.mutable_counters())["symbol_error"] = 100;
  auto first = d.Update(s);
  EXPECT_EQ(first["link_downed"].delta, 0u);  // nothing to compare with yet
  (*s.mutable_counters())["link_downed"] = 3;
  (*s.mutable_counters())["symbol_error"] = 7;  // cleared by an admin, then 7 more
  auto second = d.Update(s);
  EXPECT_EQ(second["link_downed"].delta, 1u);
  EXPECT_EQ(second["symbol_error"].delta, 7u);
  EXPECT_TRUE(second["symbol_error"].reset);
  s.set_port(2);  // another port is another counter
  EXPECT_EQ(d.Update(s)["link_downed"].delta, 0u);
  (*s.mutable_counters())["link_downed"] = 255;
  auto stuck = d.Update(s);
  EXPECT_EQ(stuck["link_downed"].delta, 252u);
  EXPECT_TRUE(stuck["link_downed"].saturated);
  EXPECT_EQ(d.Update(s)["link_downed"].delta, 0u);
}

}  // namespace
}  // namespace hangar::agent
