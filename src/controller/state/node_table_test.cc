#include "controller/state/node_table.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(NodeTableTest, OneRecordPerNodeOfTheTopology) {
  NodeTable t(3);
  EXPECT_EQ(t.size(), 3u);
  t[1].connected = true;
  int connected = 0;
  for (const NodeRecord& r : t) connected += r.connected;
  EXPECT_EQ(connected, 1);
  t.hearing().CountLoss();
  EXPECT_EQ(t.hearing().nodes_lost_total(), 1);
}

// A reason names at most five nodes that never registered, then how many more.
TEST(NodeTableTest, ReasonsNameTheFirstFiveUnregisteredNodes) {
  NodeTable t(0);
  EXPECT_TRUE(t.in_reasons().unregistered.empty());
  t.NoteInReasons({"a", "b"}, {});
  EXPECT_EQ(t.in_reasons().unregistered, "a, b");
  EXPECT_FALSE(t.in_reasons().others);
  t.NoteInReasons({"a", "b", "c", "d", "e", "f", "g"}, {.others = true});
  EXPECT_EQ(t.in_reasons().unregistered, "a, b, c, d, e and 2 more");
  EXPECT_TRUE(t.in_reasons().others);
}

}  // namespace
}  // namespace hangar::controller
