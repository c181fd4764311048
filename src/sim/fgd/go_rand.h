// GoRand: Go 1.x math/rand (the seeded source and the Rand methods FGD's simulator calls),
// reproduced draw for draw so that `hangar sim fgd` sees the same arrival order and node
// priorities as the FGD paper's runs. Written from the algorithm's description (the additive
// lagged Fibonacci generator x[n] = x[n-607] + x[n-273] mod 2^64, seeded through the
// Park-Miller LCG); the rngCooked table Go XORs into every seed is recomputed here by
// polynomial jump-ahead instead of being carried as 607 magic numbers.
//
// Not thread-safe: one GoRand per thread. GoRngCooked() may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace hangar::sim::fgd {

inline constexpr int kGoRngLen = 607;

// Go's rngCooked: the state of the generator seeded with 1 (shifts 20/10) after 7.8e12 steps,
// element i at vector position i. Computed on first use (a few milliseconds) and cached.
const std::array<uint64_t, kGoRngLen>& GoRngCooked();

class GoRand {
 public:
  explicit GoRand(int64_t seed) { Seed(seed); }

  // rand.Seed: the same seed always restarts the same stream.
  void Seed(int64_t seed);

  int64_t Int63();  // uniform in [0, 2^63)
  int32_t Int31();  // uniform in [0, 2^31)
  uint32_t Uint32();
  double Float64();  // uniform in [0, 1)
  // Uniform in [0, n) for 0 < n < 2^31, by rejection (Go's Int31n); n <= 0 returns 0.
  int32_t Intn(int32_t n);
  // Fisher-Yates over [0, n), calling swap(i, j); Go's Shuffle with Lemire's bounded draw.
  template <typename Swap>
  void Shuffle(int32_t n, Swap swap) {
    for (int32_t i = n - 1; i > 0; --i) swap(i, LemireBelow(i + 1));
  }
  // A random permutation of [0, n), as Go's Perm builds it.
  std::vector<int32_t> Perm(int32_t n);

 private:
  int32_t LemireBelow(int32_t n);  // Go's unexported int31n, used only by Shuffle

  std::array<uint64_t, kGoRngLen> vec_{};
  int tap_ = 0;
  int feed_ = 0;
};

}  // namespace hangar::sim::fgd
