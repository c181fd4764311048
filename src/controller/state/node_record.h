// A node as the controller holds it (NodeRecord), with the last telemetry of each of its GPUs
// (GpuTelemetry): the rows of the node table (node_table.h).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/time.h"
#include "common/version.h"
#include "controller/state/ingest_lag.h"

namespace hangar::controller {

// The last telemetry of one GPU, as much as /metrics exposes (dcgm-exporter's series).
struct GpuTelemetry {
  std::string uuid;
  std::string pci_bus_id;
  uint32_t util_pct = 0, mem_util_pct = 0, temperature_c = 0, memory_temperature_c = 0;
  uint32_t power_mw = 0, sm_clock_mhz = 0, mem_clock_mhz = 0, pcie_gen = 0, pcie_width = 0;
  uint64_t energy_mj = 0, fb_used_mib = 0, fb_free_mib = 0, pcie_replays = 0, ecc_sbe = 0,
           ecc_dbe = 0;
  uint32_t remapped_corr = 0, remapped_unc = 0, last_xid = 0;
  bool remap_failure = false;
};

struct NodeRecord {
  bool connected = false;
  bool registered = false;  // has registered since the controller started
  bool lost = false;
  bool drained = false;
  std::string drain_reason;
  std::string boot_id;  // the last one its agent reported (persisted)
  Time last_heartbeat = 0;
  Time lease_until =
      -1;  // the end of the last lease granted to its agent (-1: none since the start)
  IngestLag::NodeClock clock;  // for the heartbeat lag (ingest_lag.h)
  std::string address;
  // What the agent said about its software (for config drift), kept small: the controller holds
  // one of these per node, and fleets have ten thousand nodes.
  struct Software {
    std::string driver, cuda, kernel, ofed, agent, backend;
  } software;
  // What its agent can do (common/version.h; every feature until an agent registers).
  AgentFeatures agent_features = kEveryAgentFeature;
  std::vector<GpuTelemetry> gpus;  // per GPU, from the inventory and the last heartbeat
  bool validation_asked = false;   // a Validate is out and no result came back yet
  std::set<std::string> orphans;   // tasks it runs that no attempt wants; stopping
  // Tasks it runs that the store does not know (a store restored from an older backup, or one that
  // lost rows): kept running, and the node takes no work, until they end or an operator decides
  // (DecideHeldOrphans).
  std::set<std::string> held;
  // Its image cache, as the agent last reported it: digests held, and whether what it must keep
  // does not fit its budget.
  std::set<std::string> images;
  int64_t image_bytes = 0, image_budget = 0;
  bool image_cache_full = false;
  // Its artifact cache: digests held, use, and where it serves peers ("": it does not,
  // or its address is not on the cluster's data network).
  std::set<std::string> artifacts;
  int64_t artifact_bytes = 0, artifact_budget = 0;
  bool artifact_cache_full = false;
  std::string data_url;
  bool data_url_refused = false;
};

}  // namespace hangar::controller
