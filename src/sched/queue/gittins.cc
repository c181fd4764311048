#include "sched/queue/gittins.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace hangar::sched::queue {

namespace {

constexpr int kBinsPerOctave = 8;
constexpr size_t kBins = 1 + kBinsPerOctave * 27;  // up to 2^27 s, over four years
constexpr Duration kUnknown = -2;

const std::vector<Duration>& BinStarts() {
  static const std::vector<Duration> starts = [] {
    std::vector<Duration> s = {0};
    for (size_t b = 1; b < kBins; ++b) {
      s.push_back(static_cast<Duration>(
          std::ceil(kSecond * std::exp2(static_cast<double>(b - 1) / kBinsPerOctave))));
    }
    return s;
  }();
  return starts;
}

}  // namespace

size_t RuntimeDistribution::BinOf(Duration t) {
  if (t < kSecond) return 0;
  // The octave from the bit width, then at most seven steps within it.
  const size_t octave = std::bit_width(static_cast<uint64_t>(t / kSecond)) - 1;
  size_t b = std::min(kBins - 1, 1 + kBinsPerOctave * octave);
  const auto& starts = BinStarts();
  while (b + 1 < kBins && starts[b + 1] <= t) ++b;
  return b;
}

Duration RuntimeDistribution::BinStart(size_t bin) { return BinStarts()[bin]; }

void RuntimeDistribution::AddFinished(Duration run_time) {
  if (count_.empty()) {
    count_.assign(kBins, 0);
    sum_.assign(kBins, 0);
  }
  run_time = std::max<Duration>(run_time, 0);
  const size_t b = BinOf(run_time);
  count_[b]++;
  sum_[b] += run_time;
  finished_++;
}

void RuntimeDistribution::Reestimate(std::span<const Duration> alive) {
  estimated_from_ = finished_;
  atoms_.clear();
  memo_.assign(kBins, kUnknown);
  tail_mass_ = 0;
  if (finished_ == 0) return;
  // Kaplan-Meier: a job alive at age a was at risk of finishing in every bin up to a's.
  std::vector<int64_t> at_risk(kBins + 1, 0);
  for (Duration a : alive) at_risk[BinOf(a)]++;
  for (size_t b = kBins; b-- > 0;) at_risk[b] += at_risk[b + 1] + count_[b];
  double survive = 1.0;
  for (size_t b = 0; b < kBins; ++b) {
    if (count_[b] == 0) continue;
    const double hazard = static_cast<double>(count_[b]) / static_cast<double>(at_risk[b]);
    atoms_.push_back({sum_[b] / count_[b], survive * hazard});
    survive *= 1.0 - hazard;
  }
  tail_mass_ = survive;
}

Duration RuntimeDistribution::ComputeRank(Duration age) const {
  size_t k = 0;
  while (k < atoms_.size() && atoms_[k].value <= age) ++k;
  double survivors = tail_mass_;
  for (size_t i = k; i < atoms_.size(); ++i) survivors += atoms_[i].mass;
  // Stopping when the job reaches atom j completes the survivors up to j; it costs each of them
  // its remaining run time and every other survivor the whole quantum.
  double done = 0, spent_on_done = 0, best = -1;
  for (size_t j = k; j < atoms_.size(); ++j) {
    const double quantum = static_cast<double>(atoms_[j].value - age);
    done += atoms_[j].mass;
    spent_on_done += atoms_[j].mass * quantum;
    if (done <= 0) continue;
    const double per_completion = (spent_on_done + (survivors - done) * quantum) / done;
    if (best < 0 || per_completion < best) best = per_completion;
  }
  return best < 0 ? -1 : static_cast<Duration>(best);
}

Duration RuntimeDistribution::RankPerGpu(Duration age) const {
  return RankPerGpuInBin(BinOf(std::max<Duration>(age, 0)));
}

Duration RuntimeDistribution::RankPerGpuInBin(size_t bin) const {
  if (atoms_.empty()) return -1;
  if (memo_[bin] == kUnknown) memo_[bin] = ComputeRank(BinStart(bin));
  return memo_[bin];
}

bool GittinsRanker::Due(const RuntimeDistribution& d) const {
  const int64_t from = d.estimated_from();
  return d.finished() >= from + std::max<int64_t>(1, from * options_.reestimate_growth_pct / 100);
}

bool GittinsRanker::Finished(uint64_t job_class, Duration run_time, uint64_t parent_class) {
  pooled_.AddFinished(run_time);
  RuntimeDistribution& d = classes_[job_class];
  d.AddFinished(run_time);
  bool due = Due(d) || Due(pooled_);
  if (parent_class != 0 && parent_class != job_class) {
    RuntimeDistribution& p = classes_[parent_class];
    p.AddFinished(run_time);
    due = due || Due(p);
  }
  return due;
}

void GittinsRanker::Reestimate(std::span<const AliveJob> alive) {
  std::vector<Duration> ages;
  for (auto& [job_class, d] : classes_) {
    if (!Due(d)) continue;
    ages.clear();
    for (const AliveJob& a : alive) {
      if (a.job_class == job_class || a.parent_class == job_class) ages.push_back(a.age);
    }
    d.Reestimate(ages);
    version_++;
  }
  if (Due(pooled_)) {
    ages.clear();
    for (const AliveJob& a : alive) ages.push_back(a.age);
    pooled_.Reestimate(ages);
    version_++;
  }
}

Duration GittinsRanker::NextStep(Duration age) {
  const size_t b = RuntimeDistribution::BinOf(std::max<Duration>(age, 0));
  return b + 1 < kBins ? RuntimeDistribution::BinStart(b + 1) : kNever;
}

GittinsRanker::Step GittinsRanker::RankAt(uint64_t job_class, Duration age, int64_t milli_gpu,
                                          uint64_t parent_class) const {
  const size_t bin = RuntimeDistribution::BinOf(std::max<Duration>(age, 0));
  Duration per_gpu = -1;
  for (uint64_t c : {job_class, parent_class}) {
    if (per_gpu >= 0 || (c == parent_class && (c == 0 || c == job_class))) continue;
    auto it = classes_.find(c);
    if (it != classes_.end() && it->second.estimated_from() >= options_.min_class_samples) {
      per_gpu = it->second.RankPerGpuInBin(bin);
    }
  }
  if (per_gpu < 0) per_gpu = pooled_.RankPerGpuInBin(bin);
  if (per_gpu < 0) per_gpu = std::max(RuntimeDistribution::BinStart(bin), kSecond);
  return {per_gpu * milli_gpu / 1000,
          bin + 1 < kBins ? RuntimeDistribution::BinStart(bin + 1) : kNever};
}

int64_t GittinsRanker::Rank(uint64_t job_class, Duration age, int64_t milli_gpu,
                            uint64_t parent_class) const {
  return RankAt(job_class, age, milli_gpu, parent_class).rank;
}

}  // namespace hangar::sched::queue
