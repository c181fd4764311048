// What the controller state's unit tests share: small clusters of 8-H100 nodes named "a", "b", ...
// and the validation report of a healthy 8-H100 node.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cluster/cluster_yaml.h"
#include "cluster/spares_yaml.h"
#include "job/job_spec.h"

namespace hangar::controller::testing {

// A job file's spec; the test fails when it does not parse.
inline job::JobSpec Spec(const std::string& yaml) {
  auto s = job::ParseJobSpec(yaml, "job.yaml");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : job::JobSpec{};
}

// `count` nodes, "a", "b", ... of 8 H100s each, on no fabric.
inline std::shared_ptr<const cluster::Topology> H100Nodes(int count) {
  std::string nodes;
  for (int i = 0; i < count; ++i)
    nodes += std::string(nodes.empty() ? "" : ", ") + "{name: " + char('a' + i) + "}";
  auto f = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 512Gi}\n"
      "nodes: [" +
          nodes + "]\n",
      "c.yaml");
  EXPECT_TRUE(f.ok());
  return f.ok() ? f->topology : nullptr;
}
// A cluster file's topology and its `spares:` block (none kept without one); the test fails when
// either does not parse.
inline std::shared_ptr<const cluster::Topology> TopologyWithSpares(const std::string& yaml,
                                                                   cluster::SparesConfig* spares) {
  auto f = cluster::ParseClusterYaml(yaml, "c.yaml");
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return nullptr;
  YamlSource src("c.yaml");
  auto root = src.Parse(yaml);
  EXPECT_TRUE(root.ok());
  if (root.ok() && (*root)["spares"]) {
    auto parsed = cluster::ParseSpares(src, (*root)["spares"], *f->topology);
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (parsed.ok()) *spares = *parsed;
  }
  return f->topology;
}
inline std::shared_ptr<const cluster::Topology> OneNodeTopology() { return H100Nodes(1); }
inline std::shared_ptr<const cluster::Topology> TwoNodeTopology() { return H100Nodes(2); }

// What `hangar-validate` reports for a healthy 8-H100 node (ValidationResult.json); GPU 3's GEMM
// figure may be given to make it slow against the fleet.
inline std::string HealthyValidationJson(double gemm_on_gpu3 = 700) {
  nlohmann::json gpus = nlohmann::json::array();
  for (int g = 0; g < 8; ++g) {
    gpus.push_back({{"index", g},
                    {"model", "H100"},
                    {"gemm_tflops", g == 3 ? gemm_on_gpu3 : 700.0},
                    {"mem_bw_gbs", 3000.0},
                    {"h2d_gbs", 50.0},
                    {"d2h_gbs", 50.0}});
  }
  return nlohmann::json{{"gpus", gpus}, {"nccl_busbw_gbs", 400.0}}.dump();
}

}  // namespace hangar::controller::testing
