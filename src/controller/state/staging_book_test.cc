#include "controller/state/staging_book.h"

#include <gtest/gtest.h>

namespace hangar::controller {
namespace {

TEST(StagingBookTest, ImageSizesAndCachedEstimates) {
  StagingBook b;
  EXPECT_EQ(b.ImageBytes("sha256:a", 7), 7) << "unknown: the caller's guess";
  b.NoteImageBytes("sha256:a", 1 << 20);
  EXPECT_EQ(b.ImageBytes("sha256:a", 7), 1 << 20);
  auto [s, fresh] = b.SecondsFor("img\n");
  ASSERT_TRUE(fresh);
  s->assign(3, 4);
  auto [again, fresh_again] = b.SecondsFor("img\n");
  EXPECT_FALSE(fresh_again);
  EXPECT_EQ(again, s);
  EXPECT_EQ((*again)[2], 4);
  b.ForgetSeconds();
  EXPECT_TRUE(b.SecondsFor("img\n").second) << "a node's cache changed: estimated afresh";
}

// Without a member serving peers, at most `readers` nodes read the origin at once; the swarm ends
// once no member stages and nobody waits.
TEST(StagingBookTest, SwarmLimitsOriginReadersAndEndsWhenIdle) {
  StagingBook b;
  bool fresh = false;
  StagingBook::Swarm& w = b.Join("sha256:d", &fresh);
  EXPECT_TRUE(fresh);
  EXPECT_TRUE(b.HasSwarm("sha256:d"));
  EXPECT_TRUE(w.MayReadOrigin(1, 1));
  w.origin_readers.insert(1);
  w.staging.insert(1);
  EXPECT_TRUE(w.MayReadOrigin(1, 1)) << "a reader already";
  EXPECT_FALSE(w.MayReadOrigin(2, 1));
  EXPECT_TRUE(w.MayReadOrigin(2, 2));
  w.waiting.emplace_back(5, 0, 2);
  b.Join("sha256:d", &fresh);
  EXPECT_FALSE(fresh);
  w.Leave(1);
  EXPECT_TRUE(w.MayReadOrigin(2, 1));
  b.EndIfIdle("sha256:d");
  EXPECT_NE(b.FindSwarm("sha256:d"), nullptr) << "node 2 still waits";
  w.waiting.clear();
  b.EndIfIdle("sha256:d");
  EXPECT_EQ(b.FindSwarm("sha256:d"), nullptr);
}

TEST(StagingBookTest, AMemberServingPeersLetsEveryNodeRead) {
  StagingBook b;
  bool fresh = false;
  StagingBook::Swarm& w = b.Join("sha256:e", &fresh);
  w.members = {4};
  w.holders = 1;
  w.origin_readers = {1, 2};
  EXPECT_TRUE(w.MayReadOrigin(3, 1));
}

}  // namespace
}  // namespace hangar::controller
