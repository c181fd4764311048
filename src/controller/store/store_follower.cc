#include "controller/store/store_follower.h"

namespace hangar::controller {

Status StoreFollower::LoadAll(std::vector<const JobRow*>* changed) {
  HANGAR_ASSIGN_OR_RETURN(StoreContents c, store_->Load());
  jobs_.clear();
  nodes_.clear();
  values_.clear();
  for (auto& j : c.jobs) {
    const uint64_t id = j.id;
    auto it = jobs_.emplace_hint(jobs_.end(), id, std::move(j));
    if (changed) changed->push_back(&it->second);
  }
  for (auto& n : c.nodes) {
    std::string name = n.name;
    nodes_.emplace(std::move(name), std::move(n));
  }
  for (auto& v : c.values) {
    auto key = std::make_pair(v.table, v.key);
    values_.emplace(std::move(key), std::move(v));
  }
  rev_ = c.rev;
  loaded_ = true;
  ++full_loads_;
  return Status::Ok();
}

Status StoreFollower::CatchUp(std::vector<const JobRow*>* changed) {
  if (changed) changed->clear();
  if (!loaded_) return LoadAll(changed);
  HANGAR_ASSIGN_OR_RETURN(StoreChanges c, store_->ChangesSince(rev_));
  if (c.reset) return LoadAll(changed);
  ++catch_ups_;
  rows_followed_ += static_cast<int64_t>(c.jobs.size());
  for (uint64_t id : c.erased_jobs) jobs_.erase(id);
  for (auto& j : c.jobs) {
    const uint64_t id = j.id;
    JobRow& slot = jobs_[id];
    slot = std::move(j);
    if (changed) changed->push_back(&slot);
  }
  for (auto& n : c.nodes) {
    std::string name = n.name;
    nodes_[std::move(name)] = std::move(n);
  }
  for (auto& v : c.values) {
    auto key = std::make_pair(v.table, v.key);
    if (v.erase) {
      values_.erase(key);
    } else {
      values_[std::move(key)] = std::move(v);
    }
  }
  rev_ = c.rev;
  return Status::Ok();
}

StoreContents StoreFollower::Take() {
  StoreContents c;
  c.rev = rev_;
  c.jobs.reserve(jobs_.size());
  for (auto& [id, j] : jobs_) c.jobs.push_back(std::move(j));
  for (auto& [name, n] : nodes_) c.nodes.push_back(std::move(n));
  for (auto& [key, v] : values_) c.values.push_back(std::move(v));
  jobs_.clear();
  nodes_.clear();
  values_.clear();
  loaded_ = false;
  return c;
}

}  // namespace hangar::controller
