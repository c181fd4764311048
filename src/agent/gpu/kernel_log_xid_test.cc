#include "agent/gpu/kernel_log_xid.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "agent/gpu/pci_address.h"

namespace hangar::agent {
namespace {

TEST(PciAddress, ParsesEverySpelling) {
  auto nvml = ParsePciAddress("00000000:3B:00.0");
  auto sysfs = ParsePciAddress("0000:3b:00.0");
  auto kernel = ParsePciAddress("0000:3b:00");
  auto short_form = ParsePciAddress("3b:00.1");
  ASSERT_TRUE(nvml && sysfs && kernel && short_form);
  EXPECT_EQ(*nvml, *sysfs);
  EXPECT_TRUE(kernel->SameSlot(*nvml));
  EXPECT_EQ(short_form->function, 1u);
  EXPECT_EQ(SysfsPciName(*nvml), "0000:3b:00.0");
  EXPECT_EQ(SysfsPciName(*ParsePciAddress("0001:c1:1f.7")), "0001:c1:1f.7");
  EXPECT_FALSE(ParsePciAddress(""));
  EXPECT_FALSE(ParsePciAddress("mlx5_0"));
  EXPECT_FALSE(ParsePciAddress("0000:3b:00.9"));
  EXPECT_FALSE(ParsePciAddress("0000:3b:zz.0"));
}

TEST(KernelXid, ParsesDriverLines) {
  auto x = ParseKernelXidLine(
      "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off "
      "the bus.");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->code, 79u);
  EXPECT_EQ(x->pci.bus, 0x3bu);
  EXPECT_EQ(x->message,
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.");
  // A /dev/kmsg record, and the older form with no "pid=".
  auto k = ParseKernelXidLine(
      "3,1042,5678901234,-;NVRM: Xid (PCI:0000:c1:00): 48, An uncorrectable double bit error\n");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->code, 48u);
  EXPECT_EQ(k->pci.bus, 0xc1u);
  EXPECT_EQ(k->message.back(), 'r');
  EXPECT_FALSE(ParseKernelXidLine("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15"));
  EXPECT_FALSE(ParseKernelXidLine("NVRM: Xid (PCI:0000:3b:00): pid=1, no code"));
  EXPECT_FALSE(ParseKernelXidLine("NVRM: Xid (PCI:garbage): 79, x"));
}

TEST(KernelXid, ReaderFollowsAGrowingFile) {
  const std::string path = ::testing::TempDir() + "kmsg." + std::to_string(getpid());
  {
    std::ofstream out(path);
    out << "[    5.1] nvidia-nvlink: Nvlink Core is being initialized\n"
        << "[   99.2] NVRM: Xid (PCI:0000:18:00): 13, pid=77, Graphics Exception\n"
        << "[  100.0] NVRM: Xid (PCI:0000:28:00): 6";  // the rest is not written yet
  }
  auto reader = KernelLogXidReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  auto first = (*reader)->Poll();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].code, 13u);
  EXPECT_TRUE((*reader)->Poll().empty());
  {
    std::ofstream out(path, std::ios::app);
    out << "3, pid=1, Ch 00000010, intr 10000000. MMU Fault\n";
  }
  auto second = (*reader)->Poll();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].code, 63u);  // the line finished across two writes
  EXPECT_EQ(second[0].pci.bus, 0x28u);
  std::remove(path.c_str());
}

TEST(KernelXid, UnreadableLogIsAnError) {
  auto reader = KernelLogXidReader::Open("/nonexistent/kmsg");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().message(),
            "cannot read the kernel log /nonexistent/kmsg: No such file or directory");
}

}  // namespace
}  // namespace hangar::agent
