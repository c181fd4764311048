#include "controller/state/progress_book.h"

#include <algorithm>

namespace hangar::controller {

std::optional<ProgressBook::Straggler> ProgressBook::Record(JobId job, uint32_t attempt,
                                                            uint32_t rank, const std::string& node,
                                                            uint64_t step, int64_t step_time_us,
                                                            Time now,
                                                            const job::ProgressSpec& spec) {
  auto [it, fresh] = jobs_.try_emplace(job);
  Job& j = it->second;
  if (!fresh && attempt < j.attempt) return std::nullopt;  // an earlier attempt's news
  if (fresh || attempt > j.attempt) NewAttempt(&j, attempt, -1);
  Rank& r = j.ranks[rank];
  r.node = node;
  r.step = step;
  r.at = now;
  if (step_time_us <= 0) return std::nullopt;
  r.step_time_us = step_time_us;
  if (spec.straggler_factor_milli <= 0) return std::nullopt;
  const int64_t median = MedianStepTime(j);
  if (median <= 0) return std::nullopt;
  // Integer comparison: step_time > factor * median, both sides in micro-seconds times 1000.
  const bool slow = step_time_us * 1000 > spec.straggler_factor_milli * median;
  r.slow_reports = slow ? r.slow_reports + 1 : 0;
  if (r.straggler || r.slow_reports < spec.straggler_reports) return std::nullopt;
  r.straggler = true;
  return Straggler{rank, node, step_time_us, median};
}

std::optional<ProgressBook::Hang> ProgressBook::CheckHang(JobId job, uint32_t attempt, Time since,
                                                          Duration timeout,
                                                          const std::vector<uint32_t>& live,
                                                          Time now) {
  if (timeout <= 0 || live.empty()) return std::nullopt;
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.attempt != attempt) {
    // Nothing from this attempt yet: hung once it has run a whole timeout without a report.
    if (now - since < timeout) return std::nullopt;
    NewAttempt(&jobs_[job], attempt, now);
    return Hang{{}, 0, now - since};
  }
  Job& j = it->second;
  if (j.hung_at >= 0) return std::nullopt;
  Hang h;
  for (const auto& [rank, r] : j.ranks) h.last_step = std::max(h.last_step, r.step);
  for (uint32_t rank : live) {
    auto r = j.ranks.find(rank);
    if (r == j.ranks.end()) continue;  // never reported: watched through the ranks that do
    // A report taken before the attempt's clock started (a restored controller) counts from then.
    const Duration silent = now - std::max(r->second.at, since);
    if (silent < timeout) continue;
    h.ranks.push_back({rank, r->second.node, r->second.step, silent});
    h.silent_for = std::max(h.silent_for, silent);
  }
  if (h.ranks.empty()) return std::nullopt;
  j.hung_at = now;
  return h;
}

void ProgressBook::NewAttempt(Job* j, uint32_t attempt, Time hung_at) {
  j->attempt = attempt;
  j->ranks.clear();
  j->hung_at = hung_at;
}

void ProgressBook::DescribeHang(JobId job, std::string text) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.last_hang = std::move(text);
  it->second.last_hang_attempt = it->second.attempt;
}

std::optional<ProgressBook::Straggler> ProgressBook::StillStraggling(
    JobId job, uint32_t rank, const job::ProgressSpec& spec) const {
  const Job* j = Find(job);
  if (!j) return std::nullopt;
  auto r = j->ranks.find(rank);
  if (r == j->ranks.end() || !r->second.straggler ||
      r->second.slow_reports < spec.straggler_reports)
    return std::nullopt;
  return Straggler{rank, r->second.node, r->second.step_time_us, MedianStepTime(*j)};
}

const ProgressBook::Job* ProgressBook::Find(JobId job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::vector<ProgressBook::JobId> ProgressBook::Jobs() const {
  std::vector<JobId> out;
  out.reserve(jobs_.size());
  for (const auto& [id, j] : jobs_) out.push_back(id);
  return out;
}

nlohmann::json ProgressBook::Json(JobId job) const {
  const Job* j = Find(job);
  if (!j) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& [rank, r] : j->ranks) {
    nlohmann::json e = {{"rank", rank},
                        {"node", r.node},
                        {"step", r.step},
                        {"at_ms", r.at},
                        {"straggler", r.straggler}};
    if (r.step_time_us > 0) e["step_time_s"] = static_cast<double>(r.step_time_us) / 1e6;
    ranks.push_back(std::move(e));
  }
  nlohmann::json out = {
      {"attempt", j->attempt},
      {"hung_at_ms", j->hung_at >= 0 ? nlohmann::json(j->hung_at) : nlohmann::json(nullptr)},
      {"ranks", std::move(ranks)}};
  if (!j->last_hang.empty()) {
    out["last_hang"] = j->last_hang;
    out["last_hang_attempt"] = j->last_hang_attempt;
  }
  return out;
}

int64_t ProgressBook::MedianStepTime(const Job& j) {
  std::vector<int64_t> times;
  for (const auto& [rank, r] : j.ranks) {
    if (r.step_time_us > 0) times.push_back(r.step_time_us);
  }
  if (times.size() < 2) return 0;
  auto mid = times.begin() + static_cast<std::ptrdiff_t>((times.size() - 1) / 2);
  std::nth_element(times.begin(), mid, times.end());
  return *mid;
}

}  // namespace hangar::controller
