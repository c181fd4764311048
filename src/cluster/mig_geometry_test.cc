#include "cluster/mig_geometry.h"

#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "cluster/usage.h"

namespace hangar::cluster {
namespace {

// NVIDIA's placements, written out by hand (not from the table under test): {shape, starts,
// memory slices}.
struct Expected {
  MigShape shape;
  std::vector<int> starts;
  int memory_slices;
  int compute_slices;
};
const Expected kExpected[] = {
    {MigShape::k1g, {0, 1, 2, 3, 4, 5, 6}, 1, 1},
    {MigShape::k1gDouble, {0, 2, 4, 6}, 2, 1},
    {MigShape::k2g, {0, 2, 4}, 2, 2},
    {MigShape::k3g, {0, 4}, 4, 3},
    {MigShape::k4g, {0}, 4, 4},
    {MigShape::k7g, {0}, 8, 7},
};

TEST(MigGeometryTest, EveryShapeAtEveryStart) {
  for (const Expected& e : kExpected) {
    EXPECT_EQ(ShapeInfo(e.shape).memory_slices, e.memory_slices);
    EXPECT_EQ(ShapeInfo(e.shape).compute_slices, e.compute_slices);
    EXPECT_EQ(MigMaxInstances(e.shape), static_cast<int>(e.starts.size()));
    for (int s = -1; s <= kMigMemorySlices; ++s) {
      const bool allowed = std::find(e.starts.begin(), e.starts.end(), s) != e.starts.end();
      SCOPED_TRACE("shape " + std::to_string(static_cast<int>(e.shape)) + " start " +
                   std::to_string(s));
      EXPECT_EQ(MigFitsAt(0, e.shape, s), allowed);
      if (allowed) {
        EXPECT_EQ(MigPlacementMask(e.shape, s), ((1u << e.memory_slices) - 1) << s);
        EXPECT_LE(s + e.memory_slices, kMigMemorySlices);
        EXPECT_LE(s + e.compute_slices, kMigComputeSlices);  // its compute slices exist
      } else {
        EXPECT_EQ(MigPlacementMask(e.shape, s), 0);
      }
    }
  }
}

TEST(MigGeometryTest, OverlapsRefused) {
  const uint8_t three_at_0 = MigPlacementMask(MigShape::k3g, 0);
  EXPECT_TRUE(MigFitsAt(three_at_0, MigShape::k3g, 4));  // 3g + 3g
  EXPECT_FALSE(MigFitsAt(three_at_0, MigShape::k4g, 0));
  EXPECT_FALSE(MigFitsAt(three_at_0, MigShape::k1g, 3));  // slice 3 belongs to the 3g's memory
  const uint8_t one_at_0 = MigPlacementMask(MigShape::k1g, 0);
  EXPECT_FALSE(MigFitsAt(one_at_0, MigShape::k4g, 0));  // a 4g after a 1g at slot 0: no
  EXPECT_FALSE(MigFitsAt(one_at_0, MigShape::k7g, 0));
  EXPECT_TRUE(MigFitsAt(one_at_0, MigShape::k3g, 4));
  // 4g + 3g fills the GPU; 4g + 2g + 1g too.
  const uint8_t four = MigPlacementMask(MigShape::k4g, 0);
  EXPECT_TRUE(MigFitsAt(four, MigShape::k3g, 4));
  EXPECT_TRUE(MigFitsAt(four | MigPlacementMask(MigShape::k2g, 4), MigShape::k1g, 6));
  EXPECT_FALSE(
      MigFitsAt(four | MigPlacementMask(MigShape::k2g, 4), MigShape::k2g, 6));  // 2g: 0,2,4
  EXPECT_EQ(MigPlaceableShapes(0xff), 0);
  EXPECT_EQ(MigPlaceableShapes(0), 0b11'1111);
  EXPECT_EQ(MigPlaceableShapes(four | MigPlacementMask(MigShape::k3g, 4)), 0);
  // Only slice 7 free: nothing fits (no 1g starts at 7).
  EXPECT_EQ(MigPlaceableShapes(0x7f), 0);
}

TEST(MigGeometryTest, BestStartKeepsLargeShapes) {
  // A first 1g goes where it leaves a 4g (slices 0-3) and a 3g's second home untouched as far
  // as possible: not at 0-3 (kills the 4g), and at 6 rather than 4 or 5 (keeps a 2g at 4).
  EXPECT_EQ(MigBestStart(0, MigShape::k1g), 6);
  const uint8_t after = MigPlacementMask(MigShape::k1g, 6);
  EXPECT_TRUE(MigFitsAt(after, MigShape::k4g, 0));
  // The second 1g pairs up with the first (slice 5), keeping 2g at 0, 2 and the 4g.
  EXPECT_EQ(MigBestStart(after, MigShape::k1g), 5);
  // A first 3g goes at 4, so that the 4g stays possible at 0.
  EXPECT_EQ(MigBestStart(0, MigShape::k3g), 4);
  EXPECT_EQ(MigBestStart(0, MigShape::k2g), 4);
  EXPECT_EQ(MigBestStart(0, MigShape::k1gDouble), 6);
  EXPECT_EQ(MigBestStart(0, MigShape::k4g), 0);
  EXPECT_EQ(MigBestStart(0, MigShape::k7g), 0);
  EXPECT_EQ(MigBestStart(MigPlacementMask(MigShape::k4g, 0), MigShape::k4g), -1);
  // With a 3g at 0 (placed by someone else), a 2g goes at 4 and leaves 1g at 6.
  EXPECT_EQ(MigBestStart(MigPlacementMask(MigShape::k3g, 0), MigShape::k2g), 4);
  EXPECT_GT(MigLayoutValue(0), MigLayoutValue(MigPlacementMask(MigShape::k1g, 6)));
  EXPECT_GT(MigLayoutValue(MigPlacementMask(MigShape::k1g, 6)),
            MigLayoutValue(MigPlacementMask(MigShape::k1g, 0)));
}

TEST(MigGeometryTest, PartsAndNames) {
  const uint8_t h100 = MigPartFor(81559);   // what NVML reports for an H100-SXM5-80GB
  const uint8_t h200 = MigPartFor(143771);  // H200-SXM5-141GB
  const uint8_t a40 = MigPartFor(40960);
  EXPECT_EQ(MigPartAt(h100).name, "A100/H100-80GB");
  EXPECT_EQ(MigPartAt(h200).name, "H200-141GB");
  EXPECT_EQ(MigShapeOn(h100, "1g.10gb"), MigShape::k1g);
  EXPECT_EQ(MigShapeOn(h100, "1g.20gb"), MigShape::k1gDouble);
  EXPECT_EQ(MigShapeOn(h100, "3g.40gb"), MigShape::k3g);
  EXPECT_EQ(MigShapeOn(h100, "7g.80gb"), MigShape::k7g);
  EXPECT_EQ(MigShapeOn(h200, "1g.18gb"), MigShape::k1g);
  EXPECT_EQ(MigShapeOn(h200, "1g.35gb"), MigShape::k1gDouble);
  EXPECT_EQ(MigShapeOn(h200, "2g.35gb"), MigShape::k2g);
  EXPECT_EQ(MigShapeOn(h200, "4g.71gb"), MigShape::k4g);
  EXPECT_EQ(MigShapeOn(h200, "7g.141gb"), MigShape::k7g);
  EXPECT_EQ(MigShapeOn(MigPartFor(95830), "1g.24gb"), MigShape::k1gDouble);  // H100 NVL
  EXPECT_EQ(MigShapeOn(a40, "1g.10gb"), MigShape::k1gDouble);  // the same name, another shape
  EXPECT_EQ(MigShapeOn(h200, "3g.40gb"), std::nullopt);
  EXPECT_TRUE(IsKnownMigProfile("1g.12gb"));
  EXPECT_FALSE(IsKnownMigProfile("5g.50gb"));
  EXPECT_NE(KnownMigProfiles().find("H200-141GB: 1g.18gb 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb"),
            std::string::npos);
}

std::shared_ptr<const Topology> MigNode() {
  auto f = ParseClusterYaml(R"(
nodes:
  - {name: m0, gpus: 2, gpu_model: H200, gpu_memory: 141Gi, cpu: 64, memory: 512Gi, mig: true}
)",
                            "t.yaml");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f->topology;
}

GangAssignment Instance(uint32_t gpu, MigShape shape, int start) {
  GangAssignment a;
  a.grants.push_back({gpu, ShapeInfo(shape).compute_slices, 0, static_cast<int8_t>(start),
                      static_cast<uint8_t>(shape)});
  a.tasks.push_back({0, 0, 0, 1000, 1024, 0, 1});
  return a;
}

TEST(MigGeometryTest, UsageKeepsSliceMasks) {
  ClusterUsage u(MigNode());
  EXPECT_EQ(u.node(0).mig_shapes, 0b11'1111);
  auto three0 = Instance(0, MigShape::k3g, 0), three4 = Instance(0, MigShape::k3g, 4);
  ASSERT_TRUE(u.Allocate(three0).ok());
  ASSERT_TRUE(u.Allocate(three4).ok());
  EXPECT_EQ(u.gpu_mig_taken(0), 0xff);
  EXPECT_EQ(u.gpu_free_milli(0), 1);  // one compute slice left, but no memory for it
  EXPECT_FALSE(u.Allocate(Instance(0, MigShape::k1g, 3)).ok());
  EXPECT_FALSE(u.Allocate(Instance(1, MigShape::k3g, 2)).ok());  // not an allowed start
  EXPECT_EQ(u.node(0).mig_shapes, 0b11'1111);                    // GPU 1 is empty
  auto seven = Instance(1, MigShape::k7g, 0);
  ASSERT_TRUE(u.Allocate(seven).ok());
  EXPECT_EQ(u.node(0).mig_shapes, 0);
  u.Release(three0);
  EXPECT_EQ(u.gpu_mig_taken(0), 0xf0);
  EXPECT_EQ(u.node(0).mig_shapes, 0b01'1111);  // all but 7g, on GPU 0's slices 0-3
  // Two grants of one allocation on overlapping slices are refused together.
  GangAssignment both = Instance(0, MigShape::k2g, 0);
  both.grants.push_back({0, 1, 0, 1, static_cast<uint8_t>(MigShape::k1g)});
  both.tasks[0].end_grant = 2;
  EXPECT_FALSE(u.Allocate(both).ok());
  EXPECT_EQ(u.gpu_mig_taken(0), 0xf0);
}

}  // namespace
}  // namespace hangar::cluster
