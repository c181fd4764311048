#include "controller/history.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <vector>

#include "controller/dashboard_map.h"
#include "controller/state_owner.h"

namespace hangar::controller {

StatusOr<HistoryOptions> HistoryOptions::Parse(const std::string& interval,
                                               const std::string& keep_samples,
                                               const std::string& keep_hourly) {
  HistoryOptions o;
  const std::tuple<const char*, const std::string*, Duration*> flags[] = {
      {"--history-interval", &interval, &o.interval},
      {"--history-samples", &keep_samples, &o.keep_samples},
      {"--history-hourly", &keep_hourly, &o.keep_hourly}};
  for (const auto& [flag, text, out] : flags) {
    auto d = ParseDuration(*text);
    if (!d.ok() || *d <= 0) {
      return Status::InvalidArgument(std::string(flag) + " " + *text +
                                     " is not a positive duration; write it as 60s, 48h or 30d");
    }
    *out = *d;
  }
  if (o.interval < kSecond || o.interval > kHour) {
    return Status::InvalidArgument(
        "--history-interval " + interval +
        " is outside 1s-1h; the charts need a sample at least every hour");
  }
  if (o.keep_samples < o.interval) {
    return Status::InvalidArgument("--history-samples " + keep_samples +
                                   " keeps less than one sample of every " + interval +
                                   "; keep them longer than --history-interval");
  }
  return o;
}

HistoryRow SampleCluster(const ClusterState& st, Time now, Duration step) {
  const ClusterState::Counts c = st.GetCounts();
  HistoryRow r;
  r.time = now;
  r.step = step;
  r.gpus = static_cast<double>(c.gpus_total);
  r.allocated = static_cast<double>(c.gpus_allocated_milli) / 1000.0;
  // Busy and idle as the dashboard's map shows them (a GPU held by jobs, above or below the
  // idle threshold of utilisation), each GPU counted by the share of it that is held: busy +
  // idle is what is allocated on healthy, connected nodes (a GPU held on an offline or unhealthy
  // node is neither).
  const web::MapData map = web::CollectMap(st);
  std::vector<double> held(map.codes.size(), 1.0);
  std::vector<bool> shared(map.codes.size(), false);
  for (const auto& s : map.shares) {
    if (s.gpu >= held.size()) continue;
    if (!shared[s.gpu]) held[s.gpu] = 0;
    shared[s.gpu] = true;
    held[s.gpu] += s.mig_start >= 0 ? s.mig_slices / 8.0 : s.milli / 1000.0;
  }
  for (size_t g = 0; g < map.codes.size(); ++g) {
    if (map.codes[g] == 'a') r.busy += held[g];
    if (map.codes[g] == 'i') r.idle += held[g];
  }
  auto jobs = [&](const char* state) {
    auto it = c.jobs_by_state.find(state);
    return it == c.jobs_by_state.end() ? 0.0 : static_cast<double>(it->second);
  };
  r.pending = jobs("pending");
  r.running = jobs("running");
  return r;
}

HistoryUpkeep UpkeepAt(const HistoryOptions& o, Time now) {
  return {now, now - o.keep_samples, now - o.keep_hourly};
}

void HistorySampler::Start() {
  thread_ = std::thread([this] {
    MutexLock l(mu_);
    while (!stop_) {
      l.Unlock();
      SampleNow();
      l.Lock();
      l.WaitFor(cv_, std::chrono::milliseconds(options_.interval),
                [&]() HANGAR_REQUIRES(mu_) { return stop_; });
    }
  });
}

void HistorySampler::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HistorySampler::SampleNow() {
  // Stamped now, not when the owner thread gets to it: samples keep their interval and order.
  const Time now = owner_->clock()->Now();
  const bool upkeep = now / kHistoryHour != upkept_hour_;  // at start, and once an hour
  upkept_hour_ = now / kHistoryHour;
  const HistoryOptions o = options_;
  owner_->Post([now, o, upkeep](ClusterState& st, Effects* fx, StateOwner::AfterCommit*) {
    fx->batch.history.push_back(SampleCluster(st, now, o.interval));
    if (upkeep) fx->batch.history_upkeep = UpkeepAt(o, now);
  });
}

std::vector<HistoryRow> Bucket(const std::vector<HistoryRow>& hourly,
                               const std::vector<HistoryRow>& samples, Time since, Duration step) {
  const Time first_sample = samples.empty() ? kNever : samples.front().time;
  std::map<Time, std::pair<HistoryRow, int>> buckets;  // start -> sums, rows
  auto add = [&](const HistoryRow& r) {
    if (r.time < since) return;
    // Whole multiples of the step since the epoch: the same buckets whenever the page asks.
    auto& [sum, n] = buckets[r.time / step * step];
    sum.step = std::max(sum.step, std::max(step, r.step));
    sum.gpus += r.gpus, sum.allocated += r.allocated, sum.busy += r.busy, sum.idle += r.idle;
    sum.pending += r.pending, sum.running += r.running, ++n;
  };
  for (const auto& r : hourly) {
    if (r.time + kHistoryHour <= first_sample) add(r);
  }
  for (const auto& r : samples) add(r);
  std::vector<HistoryRow> out;
  out.reserve(buckets.size());
  for (const auto& [start, sum_n] : buckets) {
    const auto& [s, n] = sum_n;
    out.push_back({start, s.step, s.gpus / n, s.allocated / n, s.busy / n, s.idle / n,
                   s.pending / n, s.running / n});
  }
  return out;
}

namespace {
double Round3(double v) { return std::round(v * 1000.0) / 1000.0; }
}  // namespace

nlohmann::json HistoryJson(const HistoryOptions& o, Time since, Time until, Duration step,
                           const std::vector<HistoryRow>& points) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : points) {
    rows.push_back({{"time_ms", p.time},
                    {"step_ms", p.step},
                    {"gpus", Round3(p.gpus)},
                    {"allocated", Round3(p.allocated)},
                    {"busy", Round3(p.busy)},
                    {"idle", Round3(p.idle)},
                    {"pending", Round3(p.pending)},
                    {"running", Round3(p.running)}});
  }
  return {{"since_ms", since},
          {"until_ms", until},
          {"step_ms", step},
          {"interval_ms", o.interval},
          {"retention", {{"samples_ms", o.keep_samples}, {"hourly_ms", o.keep_hourly}}},
          {"points", std::move(rows)}};
}

Duration DefaultStep(const HistoryOptions& o, Duration range) {
  const Duration fine =
      std::max<Duration>(o.interval, (range + kHistoryPoints - 1) / kHistoryPoints);
  // Round up to a whole multiple of the interval, so that every bucket holds as many samples.
  return (fine + o.interval - 1) / o.interval * o.interval;
}

}  // namespace hangar::controller
