#include "controller/state/spec_interner.h"

#include <nlohmann/json.hpp>

#include "controller/store/state_store.h"

namespace hangar::controller {

std::shared_ptr<const SpecEntry> SpecInterner::Spec(std::string json, job::JobSpec spec,
                                                    const SecretSealer* sealer,
                                                    std::shared_ptr<const std::string> stored) {
  const size_t hash = std::hash<std::string>{}(json);
  auto [it, last] = specs_.equal_range(hash);
  while (it != last) {
    auto live = it->second.lock();
    if (!live) {
      it = specs_.erase(it);  // its last job is gone
      continue;
    }
    if (live->json == json) return live;
    ++it;
  }
  bool unpinned = false;
  for (const auto& g : spec.tasks)
    unpinned |= !g.container.empty() && g.container.image.find('@') == std::string::npos;
  // Sealed once per distinct spec: every job of a sweep shares the sealed text too. A restored
  // spec keeps the text the store has (sealing again would draw a new nonce: a second copy).
  if (!stored) stored = std::make_shared<const std::string>(sealer ? sealer->Seal(json) : json);
  std::string key = SpecKey(*stored);
  auto entry = std::make_shared<const SpecEntry>(
      SpecEntry{std::move(json), std::move(spec), std::move(stored), std::move(key), unpinned});
  specs_.emplace(hash, entry);
  return entry;
}

std::shared_ptr<const sched::GangRequest> SpecInterner::Request(sched::GangRequest request) {
  auto [it, last] = requests_.equal_range(request.fingerprint);
  while (it != last) {
    auto live = it->second.lock();
    if (!live) {
      it = requests_.erase(it);  // its last job is gone
      continue;
    }
    if (sched::SamePlacement(*live, request)) return live;
    ++it;
  }
  auto shared = std::make_shared<const sched::GangRequest>(std::move(request));
  requests_.emplace(shared->fingerprint, shared);
  return shared;
}

StatusOr<const SpecInterner::Warmed*> SpecInterner::Warm(
    const std::shared_ptr<const std::string>& stored_text, uint64_t job_id,
    const SecretSealer* sealer, const cluster::Topology& topology) {
  if (!stored_text) {
    return Status::Internal("job " + std::to_string(job_id) +
                            ": the store holds no spec for it; the store is damaged");
  }
  const std::string& stored = *stored_text;
  auto it = warm_.find(stored);
  if (it != warm_.end()) return &it->second;
  auto fail = [job_id](const Status& s) {
    return Status(s.code(), "job " + std::to_string(job_id) + ": " + s.message());
  };
  auto plain = UnsealSpec(sealer, stored);
  if (!plain.ok()) return fail(plain.status());
  auto parsed = nlohmann::json::parse(*plain, nullptr, false);
  if (parsed.is_discarded())
    return Status::Internal("job " + std::to_string(job_id) + ": its stored spec is not JSON");
  auto spec = job::JobSpecFromJson(parsed);
  if (!spec.ok()) return fail(spec.status());
  auto request = sched::CompileGang(*spec, topology);
  if (!request.ok()) return fail(request.status());
  Warmed w;
  w.request = Request(std::move(request).value());
  w.spec = Spec(std::move(plain).value(), std::move(spec).value(), sealer, stored_text);
  return &warm_.emplace(stored, std::move(w)).first->second;
}

}  // namespace hangar::controller
