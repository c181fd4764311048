// Reads cluster.yaml (docs/cluster-format.md) into a Topology. Errors name file:line and say what
// to write instead.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/gpu_types.h"
#include "cluster/mig_geometry.h"
#include "cluster/topology.h"
#include "common/status.h"

namespace hangar::cluster {

// Per node group: the software a node is expected to run (for config-drift checks).
struct ConfigBaseline {
  std::string group;  // "" matches every node
  std::string driver_version;
  std::string cuda_version;
  std::string kernel_version;
  std::string ofed_version;
};

// `data:` (docs/data.md): how nodes share artifacts.
struct DataConfig {
  std::string network;     // CIDR of the data network ("10.20.0.0/16"); empty: any address
  int origin_readers = 4;  // at most this many nodes read one object's origin at once
  int64_t chunk_bytes = 8ll << 20;
  int fanout = 3;                            // peers a node passes each chunk on to
  int64_t origin_bytes_per_s = 100ll << 20;  // for placement: what staging from the origin gets
  int64_t peer_bytes_per_s = 1ll << 30;      // and from a peer
  // Folders a file:// artifact source may lie under (after its links are resolved); none: no
  // file:// sources. The agent opens them as the job's user.
  std::vector<std::string> file_roots;
};

// Whether `host` (an IPv4 or IPv6 address) lies in `cidr` ("10.20.0.0/16", "fd00::/8"); an empty
// cidr holds everything.
bool AddressInNetwork(const std::string& host, const std::string& cidr);

// `gpu_models:` (docs/cluster-format.md): CPU and host memory per GPU for jobs on a
// model, after Slurm's DefCpuPerGPU / DefMemPerGPU. A task that asks for neither CPU nor memory
// gets the defaults; one above a maximum is refused at submission.
struct GpuModelLimits {
  std::string model;
  int64_t default_milli_cpu_per_gpu = 0;  // always set: configured, or derived (below)
  int64_t default_memory_mib_per_gpu = 0;
  int64_t max_milli_cpu_per_gpu = 0;  // 0: no maximum
  int64_t max_memory_mib_per_gpu = 0;
  bool cpu_derived = false;     // the default was not written: the smallest node CPU / GPUs
  bool memory_derived = false;  // likewise for memory
  int line = 0;
};

struct ClusterFile {
  std::shared_ptr<const Topology> topology;
  std::vector<ConfigBaseline> baselines;
  // containers.mounts_allowed: host paths container tasks may mount (and what lies below them).
  std::vector<std::string> mounts_allowed;
  DataConfig data;
  // `mig: {fixed_layouts: {NODES: [PROFILE, ...]}}` (docs/mig.md): nodes whose MIG GPUs
  // each keep these instances, never re-cut by the queue. By node index; the profiles as written
  // (the agent creates them) and the layout they make on one GPU.
  struct FixedMigLayout {
    std::vector<std::string> profiles;
    MigLayout layout;
  };
  std::map<uint32_t, FixedMigLayout> mig_fixed_layouts;
  std::vector<GpuModelLimits> gpu_models;  // one per model listed, in file order
  GpuTypes gpu_types;                      // Slurm's GPU type names -> models (gpu_types.h)
  // networks.management (docs/networks.md): the CIDR the controller listens on and its
  // agents talk over; "" when not declared.
  std::string management_network;
};

StatusOr<ClusterFile> LoadClusterFile(const std::string& path);
// `source_name` is what errors call the document.
StatusOr<ClusterFile> ParseClusterYaml(std::string_view text, const std::string& source_name);

// Expands "gpu-[00-15]" into gpu-00 ... gpu-15 (zero padded to the width of the first bound);
// a name without brackets is returned as is.
StatusOr<std::vector<std::string>> ExpandNameRange(std::string_view pattern);

}  // namespace hangar::cluster
