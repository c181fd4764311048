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
      if (v.erase)
        values_.erase({v.table, v.key});
      else
        values_[{v.table, v.key}] = v;
    }
    for (const auto& h : b.history) history_[{h.step == kHistoryHour, h.time}] = h;
    Upkeep(b.history_upkeep);
    return Status::Ok();
  }
  StatusOr<std::vector<HistoryRow>> History(bool hourly, Time since) override {
    std::vector<HistoryRow> out;
    for (auto it = history_.lower_bound({hourly, since});
         it != history_.end() && it->first.first == hourly; ++it)
      out.push_back(it->second);
    return out;
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
    for (auto it = events_.rbegin(); it != events_.rend() && static_cast<int>(out.size()) < limit;
         ++it) {
      if (it->subject.compare(0, prefix.size(), prefix) == 0) out.push_back(*it);
    }
    return out;
  }
  StatusOr<std::vector<AuditRow>> Audit(const std::string& user, int limit) override {
    std::vector<AuditRow> out;
    for (auto it = audit_.rbegin(); it != audit_.rend() && static_cast<int>(out.size()) < limit;
         ++it) {
      if (user.empty() || it->user == user) out.push_back(*it);
    }
    return out;
  }
  std::string Describe() const override { return "memory://"; }

 private:
  // The SQL stores' roll-up (HistoryUpkeep), row by row.
  void Upkeep(const HistoryUpkeep& u) {
    std::map<Time, std::pair<HistoryRow, int>> hours;  // hour -> sums, samples
    for (auto it = history_.begin(); u.roll_up_before && it != history_.end() && !it->first.first;
         ++it) {
      const HistoryRow& r = it->second;
      if (r.time >= u.roll_up_before / kHistoryHour * kHistoryHour) break;
      auto& [sum, n] = hours[r.time / kHistoryHour * kHistoryHour];
      sum.gpus += r.gpus, sum.allocated += r.allocated, sum.busy += r.busy, sum.idle += r.idle;
      sum.pending += r.pending, sum.running += r.running, ++n;
    }
    for (auto& [hour, sum_n] : hours) {
      auto& [s, n] = sum_n;
      HistoryRow row{hour,       kHistoryHour, s.gpus / n,    s.allocated / n,
                     s.busy / n, s.idle / n,   s.pending / n, s.running / n};
      history_.emplace(std::make_pair(true, hour), row);  // an hour rolled up already is kept
    }
    std::erase_if(history_, [&](const auto& e) {
      return e.first.second < (e.first.first ? u.drop_hourly_before : u.drop_samples_before);
    });
  }

  std::map<std::pair<bool, Time>, HistoryRow> history_;  // (hourly, time)
  std::map<uint64_t, JobRow> jobs_;
  std::map<std::string, NodeRow> nodes_;
  std::vector<EventRow> events_;
  std::vector<AuditRow> audit_;
  std::map<std::pair<std::string, std::string>, KeyValueRow> values_;
  int64_t last_event_ = 0;
};

}  // namespace

StatusOr<int64_t> StateStore::AcquireLease(const std::string&, Duration) {
  return Status::Unimplemented(
      "the store " + Describe() +
      " has a single owner; leader election needs a PostgreSQL store (--store postgres://...)");
}

Status StateStore::RenewLease(Duration) { return AcquireLease("", 0).status(); }
StatusOr<LeaseRow> StateStore::ReadLease() { return AcquireLease("", 0).status(); }
Status StateStore::AdoptLease(int64_t) { return AcquireLease("", 0).status(); }
StatusOr<std::vector<HistoryRow>> StateStore::History(bool, Time) {
  return Status::Unimplemented("the store " + Describe() + " keeps no history");
}
StatusOr<StoreChanges> StateStore::ChangesSince(int64_t) {
  return Status::Unimplemented(
      "the store " + Describe() +
      " keeps no change log; only a PostgreSQL store can be followed by a standby");
}

std::unique_ptr<StateStore> NewMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace hangar::controller
