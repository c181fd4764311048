#include "health/fault_set.h"

#include <algorithm>

namespace hangar::health {

bool FaultSet::Assert(const Finding& f, Time t) {
  if (f.clearing == Clearing::kOnRemediation && t < last_remediation_) return false;
  auto it = faults_.find(f.key);
  if (it == faults_.end()) it = faults_.emplace(f.key, Fault{f, false, 0, {}}).first;
  Fault& fault = it->second;
  Time since = fault.finding.condition.since;
  Time last_seen = fault.finding.condition.last_seen;
  if (fault.open && fault.finding.condition.effect != f.condition.effect) changed_ = true;
  fault.finding = f;
  bool opened = !fault.open;
  if (opened) {
    fault.open = true;
    since = t;
    fault.openings.push_back(t);
    changed_ = true;
  }
  fault.finding.condition.since = since;
  fault.finding.condition.last_seen = std::max(t, last_seen);
  return opened;
}

void FaultSet::Close(Fault& f, Time t) {
  if (!f.open) return;
  f.open = false;
  f.closed_at = t;
  changed_ = true;
}

void FaultSet::Resolve(std::string_view key, Time t) {
  auto it = faults_.find(key);
  if (it == faults_.end() || it->second.finding.clearing != Clearing::kWhileObserved) return;
  // An observation older than the one that opened the fault says nothing about it.
  if (t < it->second.finding.condition.last_seen) return;
  Close(it->second, t);
}

void FaultSet::Expire(Time now) {
  for (auto it = faults_.begin(); it != faults_.end();) {
    Fault& f = it->second;
    if (f.open && f.finding.clearing == Clearing::kAfterQuiet &&
        now - f.finding.condition.last_seen >= f.finding.quiet) {
      Close(f, now);
    }
    std::erase_if(f.openings, [&](Time t) { return t < now - kMemory; });
    if (!f.open && f.closed_at < now - kMemory) {
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
}

void FaultSet::OnRemediation(Time t) {
  last_remediation_ = std::max(last_remediation_, t);
  for (auto& [key, f] : faults_) {
    if (f.finding.clearing != Clearing::kWhileObserved) Close(f, t);
  }
}

void FaultSet::OnValidation(Time t, bool passed) {
  for (auto& [key, f] : faults_) {
    Clearing c = f.finding.clearing;
    if (c == Clearing::kOnValidation || (passed && c == Clearing::kAfterQuiet)) Close(f, t);
  }
}

Effect FaultSet::WorstEffect() const {
  Effect worst = Effect::kNone;
  for (const auto& [key, f] : faults_) {
    if (f.open) worst = std::max(worst, f.finding.condition.effect);
  }
  return worst;
}

const Fault* FaultSet::WorstOpen() const {
  const Fault* worst = nullptr;
  for (const auto& [key, f] : faults_) {
    if (!f.open || f.finding.condition.effect == Effect::kNone) continue;
    const Condition& c = f.finding.condition;
    if (worst == nullptr || c.effect > worst->finding.condition.effect ||
        (c.effect == worst->finding.condition.effect && c.since < worst->finding.condition.since)) {
      worst = &f;
    }
  }
  return worst;
}

int FaultSet::CountOpen(Effect e) const {
  int n = 0;
  for (const auto& [key, f] : faults_) n += f.open && f.finding.condition.effect == e;
  return n;
}

bool FaultSet::Repeated(Effect e, int n, Time now) const {
  for (const auto& [key, f] : faults_) {
    if (!f.open || f.finding.condition.effect != e) continue;
    auto recent = std::count_if(f.openings.begin(), f.openings.end(),
                                [&](Time t) { return t >= now - kMemory; });
    if (recent >= n) return true;
  }
  return false;
}

bool FaultSet::DrainBypassesValve() const {
  bool any = false;
  for (const auto& [key, f] : faults_) {
    if (!f.open || f.finding.condition.effect != Effect::kDrain) continue;
    if (!f.finding.bypasses_valve) return false;
    any = true;
  }
  return any;
}

std::vector<const Fault*> FaultSet::Open() const {
  std::vector<const Fault*> out;
  for (const auto& [key, f] : faults_) {
    if (f.open) out.push_back(&f);
  }
  return out;
}

const Fault* FaultSet::Find(std::string_view key) const {
  auto it = faults_.find(key);
  return it == faults_.end() ? nullptr : &it->second;
}

}  // namespace hangar::health
