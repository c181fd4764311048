#include "controller/state/chunk_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace hangar::controller {
namespace {

// Every member's plan, for a swarm of n stagers (and `holders` holders in front).
std::vector<std::vector<int32_t>> Plans(int64_t chunks, int holders, int roots, int n, int fanout) {
  std::vector<std::vector<int32_t>> out;
  for (int m = holders; m < holders + n; ++m)
    out.push_back(PlanChunkSources(chunks, holders, roots, m, fanout));
  return out;
}

TEST(ChunkPlanTest, TheOriginServesEachChunkOnceToAtMostRootsReaders) {
  for (int n : {1, 2, 8, 32, 100}) {
    const int roots = 4;
    auto plans = Plans(16, 0, std::min(n, roots), n, 3);
    std::map<int64_t, int> origin_reads;
    std::set<int> origin_readers;
    for (int m = 0; m < n; ++m) {
      for (int64_t c = 0; c < 16; ++c) {
        if (plans[m][c] == -1) {
          ++origin_reads[c];
          origin_readers.insert(m);
        }
      }
    }
    EXPECT_EQ(origin_reads.size(), 16u) << n;
    for (auto [c, reads] : origin_reads) EXPECT_EQ(reads, 1) << "chunk " << c << " n " << n;
    EXPECT_LE(static_cast<int>(origin_readers.size()), std::min(n, roots)) << n;
  }
}

TEST(ChunkPlanTest, EveryChunkReachesEveryMemberFromSomeoneWhoGetsItFirst) {
  const int n = 32, fanout = 3;
  auto plans = Plans(20, 0, 4, n, fanout);
  for (int64_t c = 0; c < 20; ++c) {
    std::map<int, int> children;
    for (int m = 0; m < n; ++m) {
      // Follow the parents up: no cycle, and it ends at the origin.
      int at = m, hops = 0;
      while (plans[at][c] != -1 && hops <= n) {
        ASSERT_NE(plans[at][c], at);
        ASSERT_GE(plans[at][c], 0);
        ASSERT_LT(plans[at][c], n);
        at = plans[at][c];
        ++hops;
      }
      EXPECT_LE(hops, 4) << "a 32-node swarm is at most log3(32)+1 hops deep";
      if (plans[m][c] >= 0) ++children[plans[m][c]];
    }
    for (auto [parent, k] : children) EXPECT_LE(k, fanout) << "chunk " << c;
  }
}

TEST(ChunkPlanTest, AParentAlwaysJoinedEarlierUnlessBothAreRoots) {
  const int roots = 4;
  for (int m = roots; m < 40; ++m) {
    auto plan = PlanChunkSources(16, 0, roots, m, 3);
    for (int32_t s : plan) {
      EXPECT_GE(s, 0);
      EXPECT_LT(s, m);  // a later joiner never changes an earlier member's plan
    }
  }
}

TEST(ChunkPlanTest, HoldersServeAndNoOneReadsTheOrigin) {
  auto plans = Plans(9, 3, 4, 10, 2);
  for (const auto& plan : plans) {
    for (int32_t s : plan) EXPECT_GE(s, 0);
  }
  // The first stager reads every chunk from a holder, and not all from one.
  auto first = PlanChunkSources(3, 3, 4, 3, 2);
  for (int32_t s : first) EXPECT_LT(s, 3);
  EXPECT_EQ(std::set<int32_t>(first.begin(), first.end()).size(), 2u);
}

TEST(ChunkPlanTest, ALoneStagerReadsEverythingFromTheOrigin) {
  EXPECT_EQ(PlanChunkSources(3, 0, 1, 0, 3), (std::vector<int32_t>{-1, -1, -1}));
}

}  // namespace
}  // namespace hangar::controller
