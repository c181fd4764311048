// The in-memory twin of the SQLite store, for unit tests: same contract, nothing on disk.
#include <algorithm>
#include <map>

#include "controller/store/state_store.h"

namespace hangar::controller {
namespace {

class MemoryStore final : public StateStore {
 public:
  Status Commit(const StoreBatch& b) override {
    if (b.erase_all) *this = MemoryStore();
    for (const auto& j : b.jobs) jobs_[j.id] = j;
    for (uint64_t id : b.erased_jobs) jobs_.erase(id);
    for (const auto& n : b.nodes) nodes_[n.name] = n;
    for (auto e : b.events) {
      e.id = ++last_event_;
      events_.push_back(std::move(e));
    }
    for (auto a : b.audit) {
      a.id = static_cast<int64_t>(audit_.size()) + 1;
      audit_.push_back(std::move(a));
    }
    for (const auto& v : b.values) {
      if (v.erase) values_.erase({v.table, v.key});
      else values_[{v.table, v.key}] = v;
    }
    return Status::Ok();
  }
  StatusOr<StoreContents> Load() override {
    StoreContents c;
    for (const auto& [id, j] : jobs_) c.jobs.push_back(j);
    for (const auto& [name, n] : nodes_) c.nodes.push_back(n);
    for (const auto& [key, v] : values_) c.values.push_back(v);
    return c;
  }
  StatusOr<std::vector<EventRow>> Events(const std::string& prefix, int limit) override {
    std::vector<EventRow> out;
    for (auto it = events_.rbegin(); it != events_.rend() && static_cast<int>(out.size()) < limit; ++it) {
      if (it->subject.compare(0, prefix.size(), prefix) == 0) out.push_back(*it);
    }
    return out;
  }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    std::vector<AuditRow> out;
    for (auto it = audit_.rbegin(); it != audit_.rend() && static_cast<int>(out.size()) < limit; ++it) {
      if (user.empty() || it->user == user) out.push_back(*it);
    }
    return out;
  }
  std::string Describe() const override { return "memory://"; }

 private:
  std::map<uint64_t, JobRow> jobs_;
  std::map<std::string, NodeRow> nodes_;
  std::vector<EventRow> events_;
  std::vector<AuditRow> audit_;
  std::map<std::pair<std::string, std::string>, KeyValueRow> values_;
  int64_t last_event_ = 0;
};

}  // namespace

StatusOr<int64_t> StateStore::AcquireLease(const std::string&, Duration) {
  return Status::Unimplemented("the store " + Describe() +
                               " has a single owner; leader election needs a PostgreSQL store (--store postgres://...)");
}

Status StateStore::RenewLease(Duration) { return AcquireLease("", 0).status(); }
StatusOr<LeaseRow> StateStore::ReadLease() { return AcquireLease("", 0).status(); }
Status StateStore::AdoptLease(int64_t) { return AcquireLease("", 0).status(); }
StatusOr<StoreChanges> StateStore::ChangesSince(int64_t) {
  return Status::Unimplemented("the store " + Describe() +
                               " keeps no change log; only a PostgreSQL store can be followed by a standby");
}

std::unique_ptr<StateStore> NewMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace hangar::controller
