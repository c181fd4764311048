#include "sim/fgd/go_rand.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace hangar::sim::fgd {
namespace {

constexpr uint64_t kMask63 = (uint64_t{1} << 63) - 1;

TEST(GoRandTest, CookedTableMatchesGosPublishedCheckValue) {
  EXPECT_EQ(GoRngCooked()[0] & kMask63, 5041579894721019882ULL);
  // Computed once: the same object every time.
  EXPECT_EQ(&GoRngCooked(), &GoRngCooked());
}

// Go's rand.New(rand.NewSource(1)).Int63(), the stream every Go program got before it seeded
// math/rand (widely printed, e.g. as "rand.Int() is always 5577006791947779410").
TEST(GoRandTest, SeedOneInt63MatchesGo) {
  GoRand r(1);
  EXPECT_EQ(r.Int63(), 5577006791947779410LL);
  EXPECT_EQ(r.Int63(), 8674665223082153551LL);
  EXPECT_EQ(r.Int63(), 6129484611666145821LL);
  EXPECT_EQ(r.Int63(), 4037200794235010051LL);
}

// rand.Intn(100) with seed 1 (the sequence printed by countless Go examples).
TEST(GoRandTest, SeedOneIntnMatchesGo) {
  const int32_t want[] = {81, 87, 47, 59, 81, 18, 25, 40, 56, 0,
                          94, 11, 62, 89, 28, 74, 11, 45, 37, 6};
  GoRand r(1);
  for (int32_t w : want) EXPECT_EQ(r.Intn(100), w);
}

TEST(GoRandTest, SeedIsReducedModuloTheLcgPrime) {
  const int64_t m = (int64_t{1} << 31) - 1;
  GoRand a(42), b(42 + m), zero(0), special(89482311), c(-5), d(m - 5);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a.Int63(), b.Int63());
    EXPECT_EQ(zero.Int63(), special.Int63());  // seed 0 stands for 89482311
    EXPECT_EQ(c.Int63(), d.Int63());           // negative seeds wrap
  }
}

TEST(GoRandTest, ReseedingRestartsTheStream) {
  GoRand r(7);
  std::vector<int64_t> first;
  for (int i = 0; i < 700; ++i) first.push_back(r.Int63());  // past one turn of the table
  r.Seed(7);
  for (int i = 0; i < 700; ++i) EXPECT_EQ(r.Int63(), first[i]);
}

TEST(GoRandTest, NarrowerDrawsAreSlicesOfInt63) {
  GoRand a(3), b(3);
  for (int i = 0; i < 100; ++i) {
    const int64_t x = a.Int63();
    if (i % 2 == 0) {
      EXPECT_EQ(b.Int31(), static_cast<int32_t>(x >> 32));
    } else {
      EXPECT_EQ(b.Uint32(), static_cast<uint32_t>(x >> 31));
    }
  }
  GoRand f(3), g(3);
  EXPECT_EQ(f.Float64(), static_cast<double>(g.Int63()) / 9223372036854775808.0);
}

TEST(GoRandTest, IntnOfAPowerOfTwoMasksOneDraw) {
  GoRand a(11), b(11);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Intn(64), b.Int31() & 63);
  EXPECT_EQ(a.Intn(1), 0);
  b.Int31();  // Intn(1) still consumes a draw
  EXPECT_EQ(a.Int63(), b.Int63());
}

TEST(GoRandTest, IntnStaysInRangeAndRejectsTheBiasedTail) {
  GoRand r(5);
  const int32_t n = (1 << 30) + 1;  // rejects almost half of all draws
  for (int i = 0; i < 1000; ++i) {
    const int32_t v = r.Intn(n);
    ASSERT_GE(v, 0);
    ASSERT_LT(v, n);
  }
}

TEST(GoRandTest, ShuffleAndPermArePermutations) {
  GoRand r(42);
  std::vector<int> v(1000);
  std::iota(v.begin(), v.end(), 0);
  int swaps = 0;
  r.Shuffle(1000, [&](int32_t i, int32_t j) {
    ASSERT_LE(j, i);
    std::swap(v[i], v[j]);
    ++swaps;
  });
  EXPECT_EQ(swaps, 999);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(v, sorted);

  std::vector<int32_t> p = r.Perm(1213);
  std::sort(p.begin(), p.end());
  for (int32_t i = 0; i < 1213; ++i) EXPECT_EQ(p[i], i);
}

TEST(GoRandTest, PermIsBuiltFromIntnDraws) {
  GoRand a(9), b(9);
  const std::vector<int32_t> p = a.Perm(5);
  std::vector<int32_t> m(5);
  for (int32_t i = 0; i < 5; ++i) {
    const int32_t j = b.Intn(i + 1);
    m[i] = m[j];
    m[j] = i;
  }
  EXPECT_EQ(p, m);
}

}  // namespace
}  // namespace hangar::sim::fgd
