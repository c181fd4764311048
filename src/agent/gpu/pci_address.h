// PCI addresses as the different sources write them: NVML ("00000000:3B:00.0", an 8-digit
// domain), sysfs ("0000:3b:00.0") and the kernel's Xid lines ("0000:3b:00", no function).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hangar::agent {

struct PciAddress {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;

  // The same slot, ignoring the function (a kernel Xid line names no function).
  bool SameSlot(const PciAddress& o) const {
    return domain == o.domain && bus == o.bus && device == o.device;
  }
  bool operator==(const PciAddress&) const = default;
};

// Parses "[domain:]bus:device[.function]" in hex, any case, any domain width. Nullopt when the
// text is not of that form.
std::optional<PciAddress> ParsePciAddress(std::string_view text);

// The sysfs spelling, "0000:3b:00.0": the name of the entry under /sys/bus/pci/devices.
std::string SysfsPciName(const PciAddress& a);

}  // namespace hangar::agent
