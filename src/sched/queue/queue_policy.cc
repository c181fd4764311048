#include "sched/queue/queue_policy.h"

#include <algorithm>
#include <numeric>

namespace hangar::sched::queue {

namespace {

class PriorityPolicy final : public QueuePolicy {
 public:
  std::string_view name() const override { return "priority"; }
  OrderKey Key(const PendingJob& j) const override {
    return {-static_cast<int64_t>(j.priority), j.submit, static_cast<int64_t>(j.seq),
            static_cast<int64_t>(j.id)};
  }
};

class FifoPolicy final : public QueuePolicy {
 public:
  std::string_view name() const override { return "fifo"; }
  OrderKey Key(const PendingJob& j) const override {
    return {j.submit, static_cast<int64_t>(j.seq), static_cast<int64_t>(j.id), 0};
  }
};

class ShortestJobFirstPolicy final : public QueuePolicy {
 public:
  std::string_view name() const override { return "sjf"; }
  OrderKey Key(const PendingJob& j) const override {
    return {j.time_limit > 0 ? j.time_limit : INT64_MAX, j.submit, static_cast<int64_t>(j.seq),
            static_cast<int64_t>(j.id)};
  }
};

class LeastAttainedServicePolicy final : public QueuePolicy {
 public:
  explicit LeastAttainedServicePolicy(std::vector<int64_t> thresholds)
      : thresholds_(std::move(thresholds)) {}
  std::string_view name() const override { return "las"; }
  OrderKey Key(const PendingJob& j) const override {
    int64_t level = j.attained_service;
    if (!thresholds_.empty()) {
      level = 0;
      while (level < static_cast<int64_t>(thresholds_.size()) &&
             j.attained_service >= thresholds_[level])
        ++level;
    }
    return {level, j.submit, static_cast<int64_t>(j.seq), static_cast<int64_t>(j.id)};
  }

 private:
  std::vector<int64_t> thresholds_;
};

class GittinsPolicy final : public QueuePolicy {
 public:
  std::string_view name() const override { return "gittins"; }
  OrderKey Key(const PendingJob& j) const override {
    return {j.rank, j.submit, static_cast<int64_t>(j.seq), static_cast<int64_t>(j.id)};
  }
};

}  // namespace

const std::vector<std::string_view>& QueuePolicyNames() {
  static const std::vector<std::string_view> names = {"priority", "fifo", "sjf", "las", "gittins"};
  return names;
}

StatusOr<std::unique_ptr<QueuePolicy>> MakeQueuePolicy(std::string_view name,
                                                       const QueueParams& params) {
  if (name == "priority") return std::unique_ptr<QueuePolicy>(new PriorityPolicy());
  if (name == "fifo") return std::unique_ptr<QueuePolicy>(new FifoPolicy());
  if (name == "sjf") return std::unique_ptr<QueuePolicy>(new ShortestJobFirstPolicy());
  if (name == "las") {
    return std::unique_ptr<QueuePolicy>(new LeastAttainedServicePolicy(params.las_thresholds));
  }
  if (name == "gittins") return std::unique_ptr<QueuePolicy>(new GittinsPolicy());
  std::string known;
  for (auto n : QueuePolicyNames()) known += (known.empty() ? "" : ", ") + std::string(n);
  return Status::InvalidArgument("unknown queue policy '" + std::string(name) +
                                 "'; choose one of: " + known);
}

void OrderJobs(const QueuePolicy& policy, std::span<const PendingJob> jobs,
               std::vector<uint32_t>* order) {
  std::vector<std::pair<OrderKey, uint32_t>> keyed(jobs.size());
  for (uint32_t i = 0; i < jobs.size(); ++i) keyed[i] = {policy.Key(jobs[i]), i};
  std::sort(keyed.begin(), keyed.end());
  order->resize(jobs.size());
  for (size_t i = 0; i < keyed.size(); ++i) (*order)[i] = keyed[i].second;
}

}  // namespace hangar::sched::queue
