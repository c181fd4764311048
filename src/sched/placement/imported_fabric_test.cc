// Placement on a fabric imported from Slurm's topology.conf (cluster/topology_import.h): three
// switch layers, 864 hosts. Gangs stay inside the smallest domain that has room for them.
#include <gtest/gtest.h>

#include "cluster/cluster_yaml.h"
#include "cluster/topology_import.h"
#include "sched/placement/gang_placer.h"
#include "sched/placement/scorer.h"
#include "sched/test_util.h"

namespace hangar::sched::placement {
namespace {

using cluster::Level;

// 4 pods x 6 leaves x 36 hosts, each pod's leaves under its spine switch, the spines under a core.
std::string ThreeLayerTopologyConf() {
  std::string t = "# three layers: leaves, pod spines, core\n";
  int host = 0;
  for (int pod = 0; pod < 4; ++pod) {
    std::string leaves;
    for (int leaf = 0; leaf < 6; ++leaf) {
      const std::string name = "leaf-" + std::to_string(pod) + "-" + std::to_string(leaf);
      t += "SwitchName=" + name + " Nodes=h[" + std::to_string(host + 1000) + "-" +
           std::to_string(host + 1035) + "]\n";
      host += 36;
      leaves += (leaves.empty() ? "" : ",") + name;
    }
    t += "SwitchName=spine-" + std::to_string(pod) + " Switches=" + leaves + "\n";
  }
  return t + "SwitchName=core Switches=spine-[0-3]\n";
}

std::shared_ptr<const cluster::Topology> Imported() {
  auto f = cluster::ImportSlurmTopology(ThreeLayerTopologyConf(), "topology.conf");
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  auto yaml = cluster::FabricYaml(*f);
  auto c = cluster::ParseClusterYaml(
      "node_defaults: {gpus: 8, gpu_model: H100, gpu_memory: 80Gi, cpu: 192, memory: 2Ti}\n" +
          *yaml,
      "imported");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c->topology;
}

// The smallest level with a domain that could take `nodes` whole 8-GPU nodes now.
Level SmallestWithRoom(const cluster::ClusterUsage& u, int nodes) {
  for (Level level : {Level::kNode, Level::kLeaf, Level::kSpine}) {
    for (uint32_t d = 0; d < u.topology().NumDomains(level); ++d) {
      if (u.WholeGpuCapacity(level, d, 8) >= nodes) return level;
    }
  }
  return Level::kCluster;
}

TEST(ImportedFabricTest, GangsStayInsideTheSmallestDomainWithRoom) {
  auto t = Imported();
  ASSERT_EQ(t->nodes().size(), 864u);
  ASSERT_EQ(t->leaves().size(), 24u);
  ASSERT_EQ(t->spines().size(), 4u);
  cluster::ClusterUsage u(t);
  auto scorer = MakeScorer("best-fit");
  ASSERT_TRUE(scorer.ok());
  GangPlacer placer;
  PlaceOptions o{scorer->get(), nullptr, nullptr, 1};
  // Gangs of 1 to 72 whole nodes until the cluster is full: each lands in the smallest domain that
  // had room for it when it was placed.
  const int sizes[] = {4, 36, 2, 72, 8, 16, 1, 30, 72, 12};
  int placed = 0, at_leaf = 0;
  for (int i = 0; i < 200; ++i) {
    const int nodes = sizes[i % 10];
    const Level want = SmallestWithRoom(u, nodes);
    auto req = testing::Whole(*t, nodes, 8);
    PlaceResult r = placer.Place(u, req, o);
    if (!r.placed) continue;
    ++placed;
    at_leaf += r.locality <= Level::kLeaf;
    EXPECT_EQ(r.locality, LocalityOf(*t, r.assignment));
    EXPECT_LE(r.locality, want) << "gang " << i << " of " << nodes << " nodes";
  }
  EXPECT_GT(placed, 40);
  EXPECT_GT(at_leaf, 20);
}

}  // namespace
}  // namespace hangar::sched::placement
