// Xids from the kernel log. The NVIDIA driver logs every Xid as
//   NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.
// which catches Xids NVML's event set misses (a GPU that fell off the bus stops delivering
// events). KernelLogXidReader follows /dev/kmsg, or any file a test points it at.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu/pci_address.h"
#include "common/status.h"

namespace hangar::agent {

struct KernelXid {
  PciAddress pci;       // the GPU's slot (the log names no function)
  uint64_t code = 0;    // the Xid
  std::string message;  // the log line from "NVRM:" on
};

// Parses one log line (a dmesg line or a /dev/kmsg record "6,1234,5678,-;NVRM: ..."); nullopt
// when it is not an Xid line.
std::optional<KernelXid> ParseKernelXidLine(std::string_view line);

class KernelLogXidReader {
 public:
  // Opens `path` for non-blocking reads. A character device (/dev/kmsg) is read from its end,
  // so Xids logged before the agent started are not reported again on every restart; a regular
  // file is read from its start. Fails when the path cannot be opened.
  static StatusOr<std::unique_ptr<KernelLogXidReader>> Open(const std::string& path);
  ~KernelLogXidReader();
  KernelLogXidReader(const KernelLogXidReader&) = delete;
  KernelLogXidReader& operator=(const KernelLogXidReader&) = delete;

  // The Xid lines that appeared since the last call. Never blocks. Not thread-safe.
  std::vector<KernelXid> Poll();
  const std::string& path() const { return path_; }

 private:
  KernelLogXidReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

  int fd_;
  std::string path_;
  std::string partial_;  // a line whose end has not been written yet
};

}  // namespace hangar::agent
