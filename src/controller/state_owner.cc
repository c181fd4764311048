#include "controller/state_owner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hangar::controller {

StateOwner::StateOwner(std::unique_ptr<ClusterState> state, std::unique_ptr<StateStore> store,
                       Clock* clock, Duration min_cycle_interval)
    : state_(std::move(state)),
      clock_(clock),
      min_cycle_interval_(min_cycle_interval),
      committer_(std::move(store)),
      check_read_model_(std::getenv("HANGAR_CHECK_READ_MODEL") != nullptr &&
                        std::string(std::getenv("HANGAR_CHECK_READ_MODEL")) == "1") {
  state_->TrackViewChanges();
}

StateOwner::~StateOwner() { Stop(); }

void StateOwner::Start() {
  // What the store held (a restart, a takeover): published before the first request.
  for (sched::JobId id : state_->JobIds()) read_model_.Put(*state_->ListViewOf(id));
  state_->TakeViewChanges();
  read_model_.Publish(read_model_.Build());
  committer_.Start();
  thread_ = std::thread([this] { Loop(); });
}

void StateOwner::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  committer_.Stop();  // after the owner's last batch: the committer drains, then ends
}

bool StateOwner::stopping() const {
  MutexLock l(mu_);
  return stopping_;
}

void StateOwner::Post(Command cmd) {
  {
    MutexLock l(mu_);
    queue_.push_back(std::move(cmd));
  }
  cv_.notify_one();
}

void StateOwner::PostLazy(Command cmd) {
  MutexLock l(mu_);
  queue_.push_back(std::move(cmd));
}

StatusOr<std::vector<AuditRow>> StateOwner::Audit(const std::string& user, int limit) {
  return ReadStore<StatusOr<std::vector<AuditRow>>>(
      [&](StateStore& s) { return s.Audit(user, limit); });
}

void StateOwner::RecordAudit(AuditRow row) {
  auto r = std::make_shared<AuditRow>(std::move(row));
  // Lazy: it rides on the owner's next commit (within 100 ms) instead of costing an fsync of its
  // own after every call.
  PostLazy(
      [r](ClusterState&, Effects* fx, AfterCommit*) { fx->batch.audit.push_back(std::move(*r)); });
}

OwnerStats StateOwner::stats() const {
  OwnerStats stats;
  {
    MutexLock l(mu_);
    stats = stats_;
  }
  stats.commits = committer_.commits();
  return stats;
}

StatusOr<std::vector<EventRow>> StateOwner::Events(const std::string& prefix, int limit) {
  return ReadStore<StatusOr<std::vector<EventRow>>>(
      [&](StateStore& s) { return s.Events(prefix, limit); });
}

StatusOr<std::vector<HistoryRow>> StateOwner::History(bool hourly, Time since) {
  return ReadStore<StatusOr<std::vector<HistoryRow>>>(
      [&](StateStore& s) { return s.History(hourly, since); });
}

void StateOwner::Loop() {
  constexpr Duration kTick = 100;  // heartbeat checks and cycles for time-driven work
  while (true) {
    std::deque<Command> batch;
    {
      MutexLock l(mu_);
      l.WaitFor(cv_, std::chrono::milliseconds(state_->NeedsCycle() ? min_cycle_interval_ : kTick),
                [&]() HANGAR_REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      batch.swap(queue_);
    }
    // Stopping: what was posted until now (a lazy audit row, a report) is still committed.
    if (!batch.empty() || !stopping()) RunBatch(batch);
    if (stopping()) break;
  }
}

void StateOwner::RunBatch(std::deque<Command>& batch) {
  Effects fx;
  AfterCommit after;
  const Time began = clock_->Now();
  for (auto& cmd : batch) cmd(*state_, &fx, &after);
  const Time now = clock_->Now();
  if (now - last_heartbeat_check_ >= 100) {
    // As of when this batch began: every heartbeat that had arrived by then has been applied
    // (heartbeats arriving while a long batch runs wait in the queue; they must not count as
    // missing).
    state_->CheckHeartbeats(began, &fx);
    last_heartbeat_check_ = now;
  }
  if (state_->NeedsHealth(now)) state_->EvaluateHealth(now, &fx);
  if (now - last_tick_ >= kSecond) {
    state_->Tick(now, &fx);
    last_tick_ = now;
  }
  double cycle_s = -1;
  if (state_->NeedsCycle() && now - last_cycle_ >= min_cycle_interval_) {
    const int64_t t0 = MonotonicNanos();
    state_->Schedule(now, &fx);
    cycle_s = (MonotonicNanos() - t0) / 1e9;
    last_cycle_ = now;
  }
  PublishJobsAfterCommit(fx.batch, &after);
  // A decision counts only once it is durable: the committer commits, then answers and sends.
  committer_.Hand(std::move(fx.batch), std::move(after), std::move(fx.messages));
  if (cycle_s >= 0 && on_cycle_) on_cycle_(cycle_s, *state_);
  MutexLock l(mu_);
  stats_.commands += static_cast<int64_t>(batch.size());
  if (cycle_s >= 0) {
    stats_.cycles++;
    stats_.last_cycle_s = cycle_s;
  }
}

void StateOwner::PublishJobsAfterCommit(const StoreBatch& batch, AfterCommit* after) {
  std::vector<sched::JobId> ids = state_->TakeViewChanges();
  if (batch.erase_all) {
    read_model_.Clear();
    ids = state_->JobIds();
  }
  for (const JobRow& r : batch.jobs) ids.push_back(r.id);
  ids.insert(ids.end(), batch.erased_jobs.begin(), batch.erased_jobs.end());
  if (ids.empty()) return;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (sched::JobId id : ids) {
    if (auto job = state_->ListViewOf(id)) {
      read_model_.Put(std::move(*job));
    } else {
      read_model_.Erase(id);
    }
  }
  std::shared_ptr<const JobsSnapshot> snapshot = read_model_.Build();
  if (check_read_model_) CheckPublished(*snapshot);
  // First among the batch's callbacks: its callers find what they were answered in the next
  // list they ask for. Nothing is published of a batch that was not committed.
  after->insert(after->begin(), [this, snapshot] {
    if (committer_.batch_failure().ok()) read_model_.Publish(snapshot);
  });
}

void StateOwner::CheckPublished(const JobsSnapshot& snapshot) {
  const std::vector<sched::JobId> ids = state_->JobIds();
  std::string wrong;
  if (ids.size() != snapshot.size()) {
    wrong = "it holds " + std::to_string(snapshot.size()) + " jobs, the state " +
            std::to_string(ids.size());
  }
  // Every job while there are few; past that a window that moves on each batch, so that a test
  // of thousands of jobs is not slowed by it.
  constexpr size_t kWindow = 2'000;
  const size_t n = std::min(ids.size(), kWindow);
  for (size_t k = 0; k < n && wrong.empty(); ++k) {
    const sched::JobId id = ids[(check_from_ + k) % ids.size()];
    const PublishedJob* published = snapshot.Find(id);
    const std::string live = JobJsonWithSpec(*state_->ListViewOf(id));
    if (!published) {
      wrong = "job " + std::to_string(id) + " is missing";
    } else if (const std::string shown = JobJsonWithSpec(*published); shown != live) {
      wrong = "job " + std::to_string(id) + " shows " + shown + " but is " + live;
    }
  }
  check_from_ += n;
  if (wrong.empty()) return;
  spdlog::critical("HANGAR_CHECK_READ_MODEL: the published read model is stale: {}", wrong);
  std::abort();
}

}  // namespace hangar::controller
