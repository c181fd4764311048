// What the controller state's unit tests share: the smallest cluster (one node "a" of 8 H100s).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "cluster/cluster_yaml.h"

namespace hangar::controller::testing {

inline std::shared_ptr<const cluster::Topology> OneNodeTopology() {
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [{name: a}]\n",
      "c.yaml");
  EXPECT_TRUE(f.ok());
  return f.ok() ? f->topology : nullptr;
}

}  // namespace hangar::controller::testing
