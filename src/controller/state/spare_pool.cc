#include "controller/state/spare_pool.h"

#include <algorithm>

#include "sched/placement/replacement.h"

namespace hangar::controller {

SparePool::SparePool(const cluster::Topology& topo, cluster::SparesConfig config)
    : topo_(topo), config_(std::move(config)) {
  const uint32_t nodes = static_cast<uint32_t>(topo_.nodes().size());
  spare_.assign(nodes, 0);
  named_.assign(nodes, 0);
  if (!config_.nodes.empty()) {
    have_.assign(1, 0);
    for (uint32_t n : config_.nodes) {
      if (n >= nodes) continue;
      named_[n] = spare_[n] = 1;
      ++have_[0];
    }
  } else if (config_.count > 0) {
    have_.assign(topo_.NumDomains(config_.per), 0);
    for (uint32_t d = 0; d < have_.size(); ++d) {
      const auto [first, end] = topo_.NodeRange(config_.per, d);
      for (uint32_t n = end; n > first && have_[d] < config_.count; --n) {
        spare_[n - 1] = 1;
        ++have_[d];
      }
    }
  }
  for (uint32_t h : have_) count_ += h;
}

uint32_t SparePool::DomainOf(uint32_t n) const {
  return config_.nodes.empty() ? topo_.DomainOf(n, config_.per) : 0;
}

uint32_t SparePool::Target(uint32_t domain) const {
  if (!config_.nodes.empty()) return static_cast<uint32_t>(config_.nodes.size());
  const auto [first, end] = topo_.NodeRange(config_.per, domain);
  return std::min<uint32_t>(config_.count, end - first);
}

std::optional<SparePool::Pick> SparePool::PickFor(
    uint32_t failed, const job::TopologyConstraint& rule,
    const std::function<bool(uint32_t)>& spare_fits,
    const std::function<bool(uint32_t)>& free_fits) const {
  if (auto n = sched::PickReplacement(topo_, failed, rule,
                                      [&](uint32_t m) { return IsSpare(m) && spare_fits(m); })) {
    return Pick{*n, true};
  }
  if (auto n = sched::PickReplacement(topo_, failed, rule,
                                      [&](uint32_t m) { return !IsSpare(m) && free_fits(m); })) {
    return Pick{*n, false};
  }
  return std::nullopt;
}

void SparePool::Take(uint32_t n) {
  if (!IsSpare(n)) return;
  spare_[n] = 0;
  --have_[DomainOf(n)];
  --count_;
  ++missing_;
}

std::vector<uint32_t> SparePool::RefillCandidates() const {
  std::vector<uint32_t> out;
  if (missing_ == 0) return out;
  for (uint32_t d = 0; d < have_.size(); ++d) {
    if (have_[d] >= Target(d)) continue;
    const auto [first, end] = config_.nodes.empty()
                                  ? topo_.NodeRange(config_.per, d)
                                  : std::pair<uint32_t, uint32_t>{0, spare_.size()};
    for (uint32_t n = end; n > first; --n) {
      const uint32_t m = n - 1;
      if (!spare_[m] && (config_.nodes.empty() || named_[m])) out.push_back(m);
    }
  }
  return out;
}

bool SparePool::Refill(uint32_t n) {
  if (n >= spare_.size() || spare_[n] || (!config_.nodes.empty() && !named_[n])) return false;
  const uint32_t d = DomainOf(n);
  if (have_[d] >= Target(d)) return false;
  spare_[n] = 1;
  ++have_[d];
  ++count_;
  if (missing_ > 0) --missing_;
  return true;
}

void SparePool::Record(JobId job, Replacement r) {
  std::vector<Replacement>& list = replaced_[job];
  list.push_back(std::move(r));
  if (list.size() > kKeptPerJob) list.erase(list.begin());
  waiting_.insert(job);
}

void SparePool::Sweep(const std::function<bool(JobId)>& gone) {
  for (auto it = replaced_.begin(); it != replaced_.end();) {
    if (gone(it->first)) {
      waiting_.erase(it->first);
      it = replaced_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(node_waits_, [&](const auto& w) { return gone(w.first); });
}

nlohmann::json SparePool::Json(JobId job) const {
  auto it = replaced_.find(job);
  const NodeWait* w = WaitingForNode(job);
  if (it == replaced_.end() && w == nullptr) return nullptr;
  nlohmann::json list = nlohmann::json::array();
  if (it != replaced_.end()) {
    for (const Replacement& r : it->second) {
      list.push_back({{"attempt", r.attempt},
                      {"at_ms", r.at},
                      {"failed", topo_.nodes()[r.failed].name},
                      {"with", topo_.nodes()[r.with].name},
                      {"spare", r.spare},
                      {"why", r.why}});
    }
  }
  nlohmann::json out = {{"replacements", std::move(list)}, {"waiting", Waiting(job)}};
  if (w != nullptr) {
    std::set<std::string> kept;
    for (const auto& t : w->was.tasks) {
      if (t.node != w->failed) kept.insert(topo_.nodes()[t.node].name);
    }
    out["holding"] = {{"failed", topo_.nodes()[w->failed].name},
                      {"since_ms", w->since},
                      {"until_ms", w->until},
                      {"nodes", kept},
                      {"why", w->why}};
  }
  return out;
}

nlohmann::json SparePool::PoolJson() const {
  nlohmann::json names = nlohmann::json::array();
  for (uint32_t n = 0; n < spare_.size(); ++n) {
    if (spare_[n]) names.push_back(topo_.nodes()[n].name);
  }
  return {{"spares", std::move(names)}, {"missing", missing_}};
}

}  // namespace hangar::controller
