#include "cluster/topology.h"

#include <gtest/gtest.h>

namespace hangar::cluster {
namespace {

NodeSpec Node(std::string name, std::string spine, std::string leaf, int gpus = 8) {
  NodeSpec s;
  s.name = std::move(name);
  s.spine = std::move(spine);
  s.leaf = std::move(leaf);
  s.gpus = gpus;
  s.gpu_model = "H100-SXM-80GB";
  s.gpu_memory_mib = 80 * 1024;
  s.milli_cpu = 128000;
  s.memory_mib = 1024 * 1024;
  return s;
}

TEST(TopologyTest, DomainsAreContiguousNodeRangesInFabricOrder) {
  TopologyBuilder b("t");
  // Declared interleaved across leaves; the topology orders them by fabric.
  b.AddNode(Node("a1", "s0", "l0"));
  b.AddNode(Node("b1", "s1", "l2"));
  b.AddNode(Node("a2", "s0", "l1"));
  b.AddNode(Node("a3", "s0", "l0"));
  auto topo = std::move(b).Build();
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  const Topology& t = **topo;
  ASSERT_EQ(t.nodes().size(), 4u);
  EXPECT_EQ(t.nodes()[0].name, "a1");
  EXPECT_EQ(t.nodes()[1].name, "a3");
  EXPECT_EQ(t.nodes()[2].name, "a2");
  EXPECT_EQ(t.nodes()[3].name, "b1");
  ASSERT_EQ(t.leaves().size(), 3u);
  EXPECT_EQ(t.leaves()[0].first_node, 0u);
  EXPECT_EQ(t.leaves()[0].end_node, 2u);
  ASSERT_EQ(t.spines().size(), 2u);
  EXPECT_EQ(t.spines()[0].first_child, 0u);
  EXPECT_EQ(t.spines()[0].end_child, 2u);
  EXPECT_EQ(t.spines()[0].end_node, 3u);
  EXPECT_EQ(t.spines()[0].num_gpus, 24u);
  EXPECT_EQ(t.total_gpus(), 32);
  EXPECT_EQ(t.DomainOf(3, Level::kSpine), 1u);
  EXPECT_EQ(*t.FindNode("a2"), 2u);
  EXPECT_FALSE(t.FindNode("zz").has_value());
  // Each 8-GPU HGX node is one NVSwitch domain.
  EXPECT_EQ(t.nvlink_domains().size(), 4u);
  EXPECT_EQ(t.gpus()[8].nvlink_domain, 1u);
  EXPECT_EQ(t.gpus()[9].index, 1);
}

TEST(TopologyTest, NvlinkLayouts) {
  TopologyBuilder b("t");
  NodeSpec pairs = Node("p", "s", "l", 4);
  pairs.nvlink = NvlinkLayout::kPairs;
  b.AddNode(pairs);
  NodeSpec none = Node("n", "s", "l", 2);
  none.nvlink = NvlinkLayout::kNone;
  b.AddNode(none);
  for (int i = 0; i < 3; ++i) {
    NodeSpec r = Node("r" + std::to_string(i), "s", "l2", 4);
    r.nvlink = NvlinkLayout::kRack;
    r.rack = "nvl";
    b.AddNode(r);
  }
  auto topo = std::move(b).Build();
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  const Topology& t = **topo;
  EXPECT_EQ(t.gpus()[0].nvlink_domain, t.gpus()[1].nvlink_domain);
  EXPECT_NE(t.gpus()[1].nvlink_domain, t.gpus()[2].nvlink_domain);
  EXPECT_NE(t.gpus()[4].nvlink_domain, t.gpus()[5].nvlink_domain);
  EXPECT_TRUE(t.has_multi_node_nvlink());
  const auto& rack = t.nvlink_domains()[t.gpus()[6].nvlink_domain];
  EXPECT_TRUE(rack.multi_node);
  EXPECT_EQ(rack.num_gpus, 12u);
  EXPECT_EQ(rack.end_node - rack.first_node, 3u);
}

TEST(TopologyTest, RejectsBadClusters) {
  {
    TopologyBuilder b("t");
    b.AddNode(Node("a", "s", "l"));
    b.AddNode(Node("a", "s", "l"));
    auto r = std::move(b).Build();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("declared twice"), std::string::npos);
  }
  {
    TopologyBuilder b("t");
    b.AddNode(Node("a", "s0", "l"));
    b.AddNode(Node("b", "s1", "l"));
    auto r = std::move(b).Build();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("belongs to one spine"), std::string::npos);
  }
  EXPECT_FALSE(TopologyBuilder("empty").Build().ok());
}

TEST(TopologyTest, ModelMasks) {
  TopologyBuilder b("t");
  b.AddNode(Node("a", "s", "l"));
  NodeSpec other = Node("b", "s", "l");
  other.gpu_model = "A100-80GB";
  b.AddNode(other);
  auto topo = *std::move(b).Build();
  std::vector<std::string> unknown;
  EXPECT_EQ(topo->MaskFor({"A100-80GB", "B200"}, &unknown), ModelMask{2});
  EXPECT_EQ(unknown, std::vector<std::string>{"B200"});
  EXPECT_EQ(topo->MaskFor({}), kAnyModel);
  EXPECT_EQ(topo->MaskToString(3), "H100-SXM-80GB|A100-80GB");
  EXPECT_TRUE(ParseLevel("leaf").has_value());
  EXPECT_FALSE(ParseLevel("rack").has_value());
}

}  // namespace
}  // namespace hangar::cluster
