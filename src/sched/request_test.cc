#include "sched/request.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace hangar::sched {
namespace {

using namespace sched::testing;

TEST(RequestTest, CompilesPerReplicaTotalsAndModelMask) {
  auto t = Cluster(R"(
nodes:
  - {name: a, gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 64, memory: 1Ti}
  - {name: b, gpus: 8, gpu_model: A100, gpu_memory: 80Gi, cpu: 64, memory: 1Ti}
)");
  auto r = Gang(*t, R"(
name: x
tasks:
  - replicas: 3
    gpus: 2
    gpu_models: [A100, B200]
    cpu_per_gpu: 4
    cpu: 1
    memory_per_gpu: 10Gi
)");
  ASSERT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.groups[0].shape.milli_cpu, 9000);
  EXPECT_EQ(r.groups[0].shape.memory_mib, 20 * 1024);
  EXPECT_EQ(r.groups[0].shape.models, cluster::ModelMask{2});
  EXPECT_EQ(r.total_whole_gpus, 6);
  EXPECT_EQ(r.total_milli_gpu, 6000);
  EXPECT_EQ(r.total_replicas, 3);
}

TEST(RequestTest, FingerprintsMatchEqualShapes) {
  auto t = Leaves(1, 1);
  auto a = Whole(*t, 2, 4);
  auto b = Whole(*t, 2, 4);
  auto c = Whole(*t, 2, 4, "leaf");
  auto d = Whole(*t, 1, 4);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_NE(a.fingerprint, c.fingerprint);
  EXPECT_NE(a.fingerprint, d.fingerprint);
  EXPECT_NE(Shared(*t, 250).fingerprint, Shared(*t, 500).fingerprint);
}

}  // namespace
}  // namespace hangar::sched
