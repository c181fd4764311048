// A fake /sys for the fabric tests: PCI functions under sys/devices/pci..., linked from
// sys/bus/pci/devices, and RDMA devices under sys/class/infiniband linking to their function.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace hangar::agent::testing {

class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = std::filesystem::temp_directory_path() /
            ("fake_sysfs." + std::to_string(getpid()) + "." + std::to_string(counter_++));
    std::filesystem::create_directories(root_ / "sys/bus/pci/devices");
    std::filesystem::create_directories(root_ / "sys/class/infiniband");
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }

  // A PCI function at `path` below sys/devices ("pci0000:10/0000:10:01.0/0000:18:00.0").
  void AddPci(const std::string& path, int numa) {
    const auto dir = root_ / "sys/devices" / path;
    std::filesystem::create_directories(dir);
    Write(dir / "numa_node", std::to_string(numa) + "\n");
    std::filesystem::create_symlink(dir, root_ / "sys/bus/pci/devices" / dir.filename());
  }
  // An RDMA device on the PCI function at `pci_path`, with one port.
  std::filesystem::path AddIb(const std::string& dev, const std::string& pci_path, int port = 1) {
    const auto dir = root_ / "sys/class/infiniband" / dev;
    std::filesystem::create_directories(dir);
    if (!std::filesystem::exists(dir / "device")) {
      std::filesystem::create_directory_symlink(root_ / "sys/devices" / pci_path, dir / "device");
    }
    const auto p = dir / "ports" / std::to_string(port);
    std::filesystem::create_directories(p / "counters");
    std::filesystem::create_directories(p / "hw_counters");
    Write(p / "state", "4: ACTIVE\n");
    Write(p / "phys_state", "5: LinkUp\n");
    Write(p / "rate", "400 Gb/sec (4X NDR)\n");
    return p;
  }
  static void Write(const std::filesystem::path& file, const std::string& text) {
    std::ofstream(file) << text;
  }

  std::string pci_root() const { return (root_ / "sys/bus/pci/devices").string(); }
  std::string ib_root() const { return (root_ / "sys/class/infiniband").string(); }
  std::string devices(const std::string& path) const {
    return (root_ / "sys/devices" / path).string();
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
};

}  // namespace hangar::agent::testing
