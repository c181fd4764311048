// Fixtures the health engine's tests share: a uniform fleet, options that start nodes in the
// pool, and an Xid event.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cluster/topology.h"
#include "health/health_engine.h"

namespace hangar::health::testing {

// `nodes` nodes of `gpus` H100s each, all in node group "hgx".
inline std::shared_ptr<const cluster::Topology> Fleet(int nodes, int gpus = 8) {
  cluster::TopologyBuilder b("test");
  for (int i = 0; i < nodes; ++i) {
    cluster::NodeSpec s;
    s.name = "node-" + std::to_string(i);
    s.gpus = gpus;
    s.gpu_model = "H100";
    s.gpu_memory_mib = 80 * 1024;
    s.milli_cpu = 64000;
    s.memory_mib = 512 * 1024;
    s.group = "hgx";
    b.AddNode(std::move(s));
  }
  auto topo = std::move(b).Build();
  EXPECT_TRUE(topo.ok()) << topo.status().ToString();
  return *topo;
}

// Nodes start in the pool, so each scenario shows one rule at a time.
inline HealthOptions InPool() {
  HealthOptions o;
  o.subjects.require_validation = false;
  return o;
}

inline GpuEvent Xid(uint16_t gpu, uint64_t code, Time at) {
  return GpuEvent{gpu, GpuEvent::Kind::kXid, code, at, ""};
}

}  // namespace hangar::health::testing
