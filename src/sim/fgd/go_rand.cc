#include "sim/fgd/go_rand.h"

#include <cstddef>
#include <vector>

namespace hangar::sim::fgd {

namespace {

constexpr int kLag = 273;                     // x[n] = x[n-607] + x[n-273]
constexpr int kFeedStart = kGoRngLen - kLag;  // 334
constexpr uint64_t kMask63 = (uint64_t{1} << 63) - 1;
constexpr int64_t kInt32Max = (int64_t{1} << 31) - 1;
constexpr uint64_t kCookedSteps = 7'800'000'000'000;

// One step of the Park-Miller generator that seeds the table: x <- 48271 x mod (2^31 - 1).
int64_t ParkMiller(int64_t x) { return 48271 * x % kInt32Max; }

// Seeding, shared by rand.Seed and the generator that produced rngCooked: 20 warm-up steps, then
// three LCG outputs folded into each of the 607 words with shifts `hi` and `mid`.
std::array<uint64_t, kGoRngLen> SeedWords(int64_t seed, int hi, int mid) {
  seed %= kInt32Max;
  if (seed < 0) seed += kInt32Max;
  if (seed == 0) seed = 89482311;
  int64_t x = seed;
  std::array<uint64_t, kGoRngLen> words{};
  for (int i = -20; i < kGoRngLen; ++i) {
    x = ParkMiller(x);
    if (i < 0) continue;
    uint64_t u = static_cast<uint64_t>(x) << hi;
    x = ParkMiller(x);
    u ^= static_cast<uint64_t>(x) << mid;
    x = ParkMiller(x);
    u ^= static_cast<uint64_t>(x);
    words[i] = u;
  }
  return words;
}

// Polynomials over Z/2^64 modulo P(z) = z^607 - z^334 - 1, the generator's characteristic
// polynomial: z^k mod P gives x[n+k] as a combination of x[n..n+606].
using Poly = std::vector<uint64_t>;

void ReduceModP(Poly* p) {
  // z^k = z^(k-607) (z^334 + 1); going down lets each fold land on a lower, unreduced term.
  for (size_t k = p->size(); k-- > static_cast<size_t>(kGoRngLen);) {
    const uint64_t c = (*p)[k];
    (*p)[k - kLag] += c;
    (*p)[k - kGoRngLen] += c;
  }
  p->resize(kGoRngLen);
}

Poly MulModP(const Poly& a, const Poly& b) {
  Poly prod(2 * kGoRngLen - 1, 0);
  for (int i = 0; i < kGoRngLen; ++i) {
    if (a[i] == 0) continue;
    for (int j = 0; j < kGoRngLen; ++j) prod[i + j] += a[i] * b[j];
  }
  ReduceModP(&prod);
  return prod;
}

Poly ZPowModP(uint64_t n) {
  Poly r(kGoRngLen, 0);
  r[0] = 1;
  for (int bit = 63; bit >= 0; --bit) {
    r = MulModP(r, r);
    if ((n >> bit) & 1) {
      r.insert(r.begin(), 0);  // times z
      ReduceModP(&r);
    }
  }
  return r;
}

// The table: seed the word array with 1 (shifts 20/10), then jump kCookedSteps ahead.
//
// Number the values the generator writes x[1], x[2], ...; the initial words are x[-606..0],
// word p holding the x[j] with j = 334 - p (mod 607). Step j writes x[j] = x[j-607] + x[j-273]
// into word (334 - j) mod 607, so after N steps word p holds the x[j] with j in [N-606, N].
std::array<uint64_t, kGoRngLen> ComputeCooked() {
  const std::array<uint64_t, kGoRngLen> init = SeedWords(1, 20, 10);
  auto word_of = [](int64_t j) {
    return static_cast<int>(((kFeedStart - j) % kGoRngLen + kGoRngLen) % kGoRngLen);
  };
  // y[i] = x[i - 606]: the initial words, then 606 more terms by the recurrence.
  std::vector<uint64_t> y(2 * kGoRngLen - 1);
  for (int i = 0; i < kGoRngLen; ++i) y[i] = init[word_of(i - (kGoRngLen - 1))];
  for (int i = kGoRngLen; i < 2 * kGoRngLen - 1; ++i) y[i] = y[i - kGoRngLen] + y[i - kLag];
  const Poly c = ZPowModP(kCookedSteps);
  std::array<uint64_t, kGoRngLen> cooked{};
  for (int k = 0; k < kGoRngLen; ++k) {
    uint64_t v = 0;  // y[N + k] = sum_i c[i] y[i + k]
    for (int i = 0; i < kGoRngLen; ++i) v += c[i] * y[i + k];
    const int64_t j = static_cast<int64_t>(kCookedSteps) + k - (kGoRngLen - 1);
    cooked[word_of(j)] = v;
  }
  return cooked;
}

}  // namespace

const std::array<uint64_t, kGoRngLen>& GoRngCooked() {
  static const std::array<uint64_t, kGoRngLen> cooked = ComputeCooked();
  return cooked;
}

void GoRand::Seed(int64_t seed) {
  tap_ = 0;
  feed_ = kFeedStart;
  vec_ = SeedWords(seed, 40, 20);
  const auto& cooked = GoRngCooked();
  for (int i = 0; i < kGoRngLen; ++i) vec_[i] ^= cooked[i];
}

int64_t GoRand::Int63() {
  tap_ = tap_ == 0 ? kGoRngLen - 1 : tap_ - 1;
  feed_ = feed_ == 0 ? kGoRngLen - 1 : feed_ - 1;
  vec_[feed_] += vec_[tap_];
  return static_cast<int64_t>(vec_[feed_] & kMask63);
}

int32_t GoRand::Int31() { return static_cast<int32_t>(Int63() >> 32); }

uint32_t GoRand::Uint32() { return static_cast<uint32_t>(Int63() >> 31); }

double GoRand::Float64() {
  // Go redraws the one value (2^63 - 1 rounding up to 2^63) that would give exactly 1.
  for (;;) {
    const double f = static_cast<double>(Int63()) / 9223372036854775808.0;
    if (f < 1.0) return f;
  }
}

int32_t GoRand::Intn(int32_t n) {
  if (n <= 0) return 0;
  if ((n & (n - 1)) == 0) return Int31() & (n - 1);
  const int64_t max = kInt32Max - (int64_t{1} << 31) % n;
  int64_t v = Int31();
  while (v > max) v = Int31();
  return static_cast<int32_t>(v % n);
}

int32_t GoRand::LemireBelow(int32_t n) {
  const uint64_t m = static_cast<uint64_t>(n);
  uint64_t prod = uint64_t{Uint32()} * m;
  if (static_cast<uint32_t>(prod) < m) {
    const uint32_t thresh =
        static_cast<uint32_t>((uint64_t{1} << 32) - m) % static_cast<uint32_t>(m);
    while (static_cast<uint32_t>(prod) < thresh) prod = uint64_t{Uint32()} * m;
  }
  return static_cast<int32_t>(prod >> 32);
}

std::vector<int32_t> GoRand::Perm(int32_t n) {
  std::vector<int32_t> m(n > 0 ? n : 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t j = Intn(i + 1);
    m[i] = m[j];
    m[j] = i;
  }
  return m;
}

}  // namespace hangar::sim::fgd
