#include "sim/engine/staging.h"

#include <algorithm>
#include <cmath>

namespace hangar::sim {

void StagingStats::Add(const StagingStats& o) {
  staged_starts += o.staged_starts;
  starts_with_objects += o.starts_with_objects;
  staging_ms += o.staging_ms;
  lost_gpu_ms += o.lost_gpu_ms;
  transfers += o.transfers;
  prestage_transfers += o.prestage_transfers;
  origin_transfers += o.origin_transfers;
  origin_bytes += o.origin_bytes;
  peer_bytes += o.peer_bytes;
  evictions += o.evictions;
  overflows += o.overflows;
}

StagingModel::StagingModel(const StagingConfig& config, uint32_t nodes)
    : config_(config), nodes_(nodes) {}

uint32_t StagingModel::Intern(const std::vector<SimArtifact>& objects) {
  std::vector<std::pair<uint32_t, int64_t>> key;
  for (const auto& a : objects) key.emplace_back(a.object, a.bytes);
  std::sort(key.begin(), key.end());
  key.erase(std::unique(key.begin(), key.end()), key.end());
  auto [it, fresh] = set_ids_.try_emplace(key, static_cast<uint32_t>(sets_.size()));
  if (fresh) {
    SetMemo m;
    for (const auto& [id, bytes] : key) m.objects.push_back({id, bytes});
    m.versions.assign(m.objects.size(), UINT64_MAX);
    sets_.push_back(std::move(m));
  }
  return it->second;
}

Duration StagingModel::TransferMs(int64_t bytes, double bytes_per_s) const {
  return static_cast<Duration>(std::ceil(static_cast<double>(bytes) * 1000.0 / bytes_per_s));
}

Time StagingModel::Stage(Time now, uint32_t set, const std::vector<uint32_t>& nodes, uint64_t owner,
                         bool prestage) {
  const SetMemo& m = sets_[set];
  Time done = now;
  for (uint32_t n : nodes) {
    // Pin what the node holds first, so that making room for the rest cannot evict it.
    for (const auto& a : m.objects) {
      auto it = nodes_[n].objects.find(a.object);
      if (it == nodes_[n].objects.end()) continue;
      it->second.last_used = std::max(it->second.last_used, now);
      done = std::max(done, it->second.ready);
      Pin(owner, n, a.object);
    }
    for (const auto& a : m.objects) {
      if (nodes_[n].objects.count(a.object)) continue;
      done = std::max(done, CopyTo(now, n, a, prestage));
      Pin(owner, n, a.object);
    }
  }
  return done;
}

Time StagingModel::CopyTo(Time now, uint32_t node, const SimArtifact& a, bool prestage) {
  ObjectCopies& c = copies_[a.object];
  Time ready;
  if (config_.peer_fanout && !c.ready.empty()) {
    ready = std::max(now + TransferMs(a.bytes, config_.peer_bytes_per_s), *c.ready.begin());
    stats_.peer_bytes += a.bytes;
  } else {
    const Time start = std::max(now, origin_free_);
    ready = start + TransferMs(a.bytes, config_.origin_bytes_per_s);
    origin_free_ = ready;
    stats_.origin_transfers++;
    stats_.origin_bytes += a.bytes;
  }
  stats_.transfers++;
  if (prestage) stats_.prestage_transfers++;
  Insert(node, a, ready, now);
  return ready;
}

void StagingModel::Insert(uint32_t node, const SimArtifact& a, Time ready, Time now) {
  MakeRoom(node, a.bytes);
  NodeCache& n = nodes_[node];
  n.objects[a.object] = Entry{a.bytes, ready, now, 0};
  n.used += a.bytes;
  ObjectCopies& c = copies_[a.object];
  c.ready.insert(ready);
  c.version++;
  dirty_ = true;
}

void StagingModel::MakeRoom(uint32_t node, int64_t bytes) {
  NodeCache& n = nodes_[node];
  while (n.used + bytes > config_.node_cache_bytes) {
    auto victim = n.objects.end();
    for (auto it = n.objects.begin(); it != n.objects.end(); ++it) {
      if (it->second.pins > 0) continue;
      if (victim == n.objects.end() || it->second.last_used < victim->second.last_used ||
          (it->second.last_used == victim->second.last_used && it->first < victim->first)) {
        victim = it;
      }
    }
    if (victim == n.objects.end()) {
      stats_.overflows++;
      return;
    }
    ObjectCopies& c = copies_[victim->first];
    c.ready.erase(c.ready.find(victim->second.ready));
    c.version++;
    dirty_ = true;
    n.used -= victim->second.bytes;
    n.objects.erase(victim);
    stats_.evictions++;
  }
}

void StagingModel::Pin(uint64_t owner, uint32_t node, uint32_t object) {
  if (pins_[owner].emplace(node, object).second) nodes_[node].objects[object].pins++;
}

void StagingModel::Unpin(uint64_t owner) {
  auto it = pins_.find(owner);
  if (it == pins_.end()) return;
  for (const auto& [node, object] : it->second) {
    auto e = nodes_[node].objects.find(object);
    if (e != nodes_[node].objects.end()) e->second.pins--;
  }
  pins_.erase(it);
}

void StagingModel::Recompute(SetMemo* m) {
  m->seconds.assign(nodes_.size(), 0);
  for (size_t i = 0; i < m->objects.size(); ++i) {
    const SimArtifact& a = m->objects[i];
    const ObjectCopies& c = copies_[a.object];
    const double rate = config_.peer_fanout && !c.ready.empty() ? config_.peer_bytes_per_s
                                                                : config_.origin_bytes_per_s;
    const int64_t s = std::max<int64_t>(1, (TransferMs(a.bytes, rate) + kSecond - 1) / kSecond);
    for (uint32_t n = 0; n < nodes_.size(); ++n) {
      if (nodes_[n].objects.count(a.object)) continue;
      m->seconds[n] = static_cast<uint16_t>(std::min<int64_t>(65535, m->seconds[n] + s));
    }
    m->versions[i] = c.version;
  }
}

const std::vector<uint16_t>* StagingModel::SecondsFor(uint32_t set) {
  SetMemo& m = sets_[set];
  for (size_t i = 0; i < m.objects.size(); ++i) {
    if (m.versions[i] != copies_[m.objects[i].object].version) {
      Recompute(&m);
      break;
    }
  }
  return &m.seconds;
}

void StagingModel::Refresh() {
  if (!dirty_) return;
  for (uint32_t s = 0; s < sets_.size(); ++s) SecondsFor(s);
  dirty_ = false;
}

void StagingModel::Preload(uint32_t node, const SimArtifact& a, Time now) {
  if (!nodes_[node].objects.count(a.object)) Insert(node, a, now, now);
}

bool StagingModel::Holds(uint32_t node, uint32_t object) const {
  return nodes_[node].objects.count(object) > 0;
}

bool StagingModel::Complete(uint32_t node, uint32_t object, Time now) const {
  auto it = nodes_[node].objects.find(object);
  return it != nodes_[node].objects.end() && it->second.ready <= now;
}

}  // namespace hangar::sim
