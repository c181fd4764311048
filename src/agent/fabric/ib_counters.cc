#include "agent/fabric/ib_counters.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>

namespace hangar::agent {
namespace fs = std::filesystem;
namespace {

// Entry names of a directory, sorted; empty when it cannot be listed.
std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  return line;
}

std::optional<uint64_t> ReadUint64(const fs::path& file) {
  const std::string s = ReadLine(file);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

void ReadCounters(const fs::path& dir, pb::IbPortSample& port) {
  for (const std::string& name : Entries(dir)) {
    if (port.counters().contains(name)) continue;  // counters/ wins over a same-named hw counter
    if (auto v = ReadUint64(dir / name)) (*port.mutable_counters())[name] = *v;
  }
}

bool ByPortNumber(const std::string& a, const std::string& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

}  // namespace

StatusOr<std::vector<pb::IbPortSample>> ReadIbPorts(const std::string& root) {
  std::vector<pb::IbPortSample> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  if (!fs::is_directory(root, ec)) {
    return Status::InvalidArgument(root +
                                   " is not a directory; --ib-root names the directory "
                                   "that holds the RDMA devices (/sys/class/infiniband)");
  }
  for (const std::string& dev : Entries(root)) {
    const fs::path dir = fs::path(root) / dev;
    const fs::path pci = fs::canonical(dir / "device", ec);
    const std::string pci_name = ec ? "" : pci.filename().string();
    const auto numa = ReadUint64(dir / "device" / "numa_node");  // "-1" reads as none
    std::vector<std::string> ports = Entries(dir / "ports");
    std::sort(ports.begin(), ports.end(), ByPortNumber);
    for (const std::string& p : ports) {
      uint32_t number = 0;
      auto [end, perr] = std::from_chars(p.data(), p.data() + p.size(), number);
      if (perr != std::errc() || end != p.data() + p.size()) continue;
      const fs::path pdir = dir / "ports" / p;
      pb::IbPortSample s;
      s.set_device(dev);
      s.set_port(number);
      s.set_state(ReadLine(pdir / "state"));
      s.set_phys_state(ReadLine(pdir / "phys_state"));
      s.set_rate(ReadLine(pdir / "rate"));
      s.set_numa_node(numa ? static_cast<int32_t>(*numa) : -1);
      s.set_pci_bus_id(pci_name);
      ReadCounters(pdir / "counters", s);
      ReadCounters(pdir / "hw_counters", s);
      out.push_back(std::move(s));
    }
  }
  return out;
}

uint64_t IbCounterMax(std::string_view name) {
  struct Width {
    std::string_view name;
    int bits;
  };
  // PortCounters (InfiniBand Architecture Specification, vol. 1, PortCounters attribute).
  static constexpr Width kWidths[] = {
      {"symbol_error", 16},
      {"link_error_recovery", 8},
      {"link_downed", 8},
      {"port_rcv_errors", 16},
      {"port_rcv_remote_physical_errors", 16},
      {"port_rcv_switch_relay_errors", 16},
      {"port_xmit_discards", 16},
      {"port_xmit_constraint_errors", 8},
      {"port_rcv_constraint_errors", 8},
      {"local_link_integrity_errors", 4},
      {"excessive_buffer_overrun_errors", 4},
      {"VL15_dropped", 16},
      {"port_xmit_wait", 32},
  };
  for (const Width& w : kWidths) {
    if (w.name == name) return (uint64_t{1} << w.bits) - 1;
  }
  return UINT64_MAX;
}

CounterChange ComputeCounterChange(uint64_t last, uint64_t now, uint64_t max) {
  CounterChange c;
  if (now < last) {
    c.delta = now;
    c.reset = true;
  } else {
    c.delta = now - last;
  }
  c.saturated = now >= max;
  return c;
}

CounterChange CounterDelta::Update(const std::string& key, uint64_t value, uint64_t max) {
  auto [it, first] = last_.try_emplace(key, value);
  if (first) return CounterChange{0, false, value >= max};
  CounterChange c = ComputeCounterChange(it->second, value, max);
  it->second = value;
  return c;
}

std::map<std::string, CounterChange> CounterDelta::Update(const pb::IbPortSample& port) {
  std::map<std::string, CounterChange> changes;
  const std::string prefix = port.device() + "/" + std::to_string(port.port()) + "/";
  for (const auto& [name, value] : port.counters()) {
    changes[name] = Update(prefix + name, value, IbCounterMax(name));
  }
  return changes;
}

}  // namespace hangar::agent
