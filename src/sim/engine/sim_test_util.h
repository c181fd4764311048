// Helpers for the lean engine's owner tests (header-only, test binaries only).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "cluster/cluster_yaml.h"
#include "sim/engine/engine.h"

namespace hangar::sim::testing {

// One node of `gpus` H100s (MIG-capable with `mig`).
inline std::shared_ptr<const cluster::Topology> OneNode(int gpus, bool mig = false) {
  auto f =
      cluster::ParseClusterYaml("nodes:\n  - {name: n, gpus: " + std::to_string(gpus) +
                                    ", gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi" +
                                    (mig ? ", mig: true" : "") + "}\n",
                                "t.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f->topology;
}

inline std::shared_ptr<const sched::GangRequest> Gpus(int n) {
  sched::TaskShape s;
  s.kind = job::GpuKind::kWhole;
  s.gpus = n;
  s.milli = 1000;
  return std::make_shared<sched::GangRequest>(sched::MakeSingleTaskRequest(s));
}

inline SimJob Job(uint64_t id, Time submit, Duration runtime, int gpus) {
  SimJob j;
  j.id = id;
  j.name = "j" + std::to_string(id);
  j.request = Gpus(gpus);
  j.submit = submit;
  j.runtime = runtime;
  j.seq = id;
  return j;
}

}  // namespace hangar::sim::testing
