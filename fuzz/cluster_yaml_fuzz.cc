// cluster.yaml as the controller and `hangar sim` read it into a Topology.
#include <cstddef>
#include <cstdint>

#include "cluster/cluster_yaml.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hangar;
  auto f = cluster::ParseClusterYaml(fuzz::AsText(data, size), "cluster.yaml");
  if (!f.ok()) return 0;
  if (!f->topology) fuzz::Fail("a parsed cluster has no topology");
  for (const auto& m : f->gpu_models) {
    if (m.default_milli_cpu_per_gpu < 0 || m.default_memory_mib_per_gpu < 0) {
      fuzz::Fail("a parsed gpu_models entry has a negative default");
    }
  }
  (void)cluster::AddressInNetwork("10.20.1.2", f->data.network);
  (void)cluster::AddressInNetwork("fd00::1", f->management_network);
  return 0;
}
