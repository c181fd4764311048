// The trace readers of `hangar sim replay` and `hangar sim fgd` (docs/trace-format.md). The first
// byte picks the reader: Hangar's CSV, Philly's job log, Philly's partitions, openb's pod list (as
// replay reads it, and as fgd does) or node list, or a seed list; the rest is the file. The
// readers take paths, so the bytes go through a memfd, never a file on disk.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "sim/fgd/openb_trace.h"
#include "sim/replay/trace.h"

namespace {

// A path whose every open reads `text` from its start.
const std::string& PathHolding(std::string_view text) {
  static const int fd = memfd_create("trace", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ftruncate(fd, 0) != 0 ||
      pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    hangar::fuzz::Fail("cannot write the memfd");
  }
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  if (size == 0) return 0;
  const std::string_view text = fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 7) {
    case 0:
      (void)sim::ReadHangarTrace(PathHolding(text));
      break;
    case 1:
      (void)sim::ReadPhillyTrace(PathHolding(text));
      break;
    case 2:
      (void)sim::ReadPhillyPartitions(PathHolding(text));
      break;
    case 3:
      (void)sim::ReadOpenbTrace(PathHolding(text));
      break;
    case 4:
      (void)sim::fgd::ParseOpenbPods(text, "pods.csv");
      break;
    case 5:
      (void)sim::fgd::ParseOpenbNodes(text, "nodes.csv");
      break;
    case 6:
      (void)sim::ParseSeedList(std::string(text));
      break;
  }
  return 0;
}
