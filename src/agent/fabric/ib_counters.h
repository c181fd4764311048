// InfiniBand / RoCE ports as the kernel shows them under /sys/class/infiniband:
//   <dev>/ports/<n>/{state,phys_state,rate}, <dev>/ports/<n>/counters/*, .../hw_counters/*,
//   <dev>/device -> the PCI function (its name is the PCI address), <dev>/device/numa_node.
// Counters are raw: they saturate or get reset, so whoever compares readings uses CounterDelta.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/agent.pb.h"

namespace hangar::agent {

namespace pb = ::hangar::agent::v1;

// Every port of every device under `root`, ordered by device then port. A missing root means no
// RDMA devices: an empty list, not an error. Files that cannot be read are left out (a port
// going away while we read it is normal); counters that are not a number are skipped.
StatusOr<std::vector<pb::IbPortSample>> ReadIbPorts(const std::string& root);

// The largest value counter `name` can hold before it saturates. The InfiniBand PortCounters
// error counters are 4 to 16 bits wide; data counters and hw_counters are 64-bit.
uint64_t IbCounterMax(std::string_view name);

// The change in one counter between two readings.
struct CounterChange {
  uint64_t delta = 0;
  bool reset = false;      // the reading went down: the counter was cleared; delta is the reading
  bool saturated = false;  // the counter sits at its maximum: delta is a lower bound
};

// Pure: the change from `last` to `now` of a counter that saturates at `max`.
CounterChange ComputeCounterChange(uint64_t last, uint64_t now, uint64_t max = UINT64_MAX);

// Remembers the last reading of each counter and turns new readings into changes. The first
// reading of a counter gives delta 0 (there is nothing to compare it with). Not thread-safe.
class CounterDelta {
 public:
  CounterChange Update(const std::string& key, uint64_t value, uint64_t max = UINT64_MAX);
  // Every counter of a port sample, keyed "<device>/<port>/<counter>", saturation from
  // IbCounterMax. Returns the changes by counter name.
  std::map<std::string, CounterChange> Update(const pb::IbPortSample& port);

 private:
  std::map<std::string, uint64_t> last_;
};

}  // namespace hangar::agent
