// Random: the seam for randomness. Everything random in Hangar draws from a seeded Random passed
// in as an argument, so that the same seed gives the same decisions everywhere.
#pragma once

#include <cstdint>

namespace hangar {

// xoshiro256** seeded through splitmix64. Deterministic across platforms and compilers.
class Random {
 public:
  explicit Random(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, n); n > 0. Unbiased (Lemire's method with rejection).
  uint64_t Uniform(uint64_t n);
  // Uniform in [0, 1).
  double UniformDouble();

 private:
  uint64_t s_[4];
};

}  // namespace hangar
