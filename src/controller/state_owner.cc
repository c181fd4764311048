#include "controller/state_owner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace hangar::controller {

StateOwner::StateOwner(std::unique_ptr<ClusterState> state, std::unique_ptr<StateStore> store,
                       Clock* clock, Duration min_cycle_interval)
    : state_(std::move(state)),
      store_(std::move(store)),
      clock_(clock),
      min_cycle_interval_(min_cycle_interval),
      check_read_model_(std::getenv("HANGAR_CHECK_READ_MODEL") != nullptr &&
                        std::string(std::getenv("HANGAR_CHECK_READ_MODEL")) == "1") {
  state_->TrackViewChanges();
}

StateOwner::~StateOwner() { Stop(); }

namespace {

// The owner thread waits for the committer while this many rows wait to be committed: a store
// that falls behind slows decisions down instead of letting them pile up in memory.
constexpr size_t kMaxWaitingRows = 200'000;

size_t Rows(const StoreBatch& b) {
  return b.jobs.size() + b.nodes.size() + b.events.size() + b.values.size() + b.audit.size() +
         b.history.size();
}

template <typename T>
void Append(std::vector<T>& to, std::vector<T>& from) {
  if (to.empty()) {
    to.swap(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  }
}

}  // namespace

void StateOwner::Start() {
  // What the store held (a restart, a takeover): published before the first request.
  for (sched::JobId id : state_->JobIds()) read_model_.Put(*state_->ListViewOf(id));
  state_->TakeViewChanges();
  read_model_.Publish(read_model_.Build());
  committer_ = std::thread([this] { CommitLoop(); });
  thread_ = std::thread([this] { Loop(); });
}

void StateOwner::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    MutexLock l(commit_mu_);
    committer_stopping_ = true;  // after the owner's last batch: the committer drains, then ends
  }
  commit_cv_.notify_all();
  if (committer_.joinable()) committer_.join();
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
  MutexLock l(mu_);
  return stats_;
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
  Hand(std::move(fx), std::move(after));
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
    if (commit_failure_.ok()) read_model_.Publish(snapshot);
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

void StateOwner::Hand(Effects fx, AfterCommit after) {
  MutexLock l(commit_mu_);
  l.Wait(commit_cv_, [&]() HANGAR_REQUIRES(commit_mu_) { return made_rows_ < kMaxWaitingRows; });
  made_rows_ += Rows(fx.batch);
  // Merged into the batch waiting before it, unless either empties the store first (a restore):
  // rows of the same job or key keep their order, and the store keeps the last.
  if (!made_.empty() && !made_.back().batch.erase_all && !fx.batch.erase_all) {
    Made& m = made_.back();
    Append(m.batch.jobs, fx.batch.jobs);
    Append(m.batch.nodes, fx.batch.nodes);
    Append(m.batch.events, fx.batch.events);
    Append(m.batch.values, fx.batch.values);
    Append(m.batch.audit, fx.batch.audit);
    Append(m.batch.history, fx.batch.history);
    if (!fx.batch.history_upkeep.empty())
      m.batch.history_upkeep = fx.batch.history_upkeep;  // the later one
    Append(m.after, after);
    Append(m.messages, fx.messages);
  } else {
    made_.push_back(Made{std::move(fx.batch), std::move(after), std::move(fx.messages)});
  }
  l.Unlock();
  commit_cv_.notify_all();
}

void StateOwner::CommitLoop() {
  while (true) {
    Made m;
    {
      MutexLock l(commit_mu_);
      l.Wait(commit_cv_,
             [&]() HANGAR_REQUIRES(commit_mu_) { return committer_stopping_ || !made_.empty(); });
      if (made_.empty()) return;  // stopping, and everything made was committed
      m = std::move(made_.front());
      made_.pop_front();
      made_rows_ -= Rows(m.batch);
    }
    commit_cv_.notify_all();  // the owner may wait for room
    commit_failure_ = CommitOrRefuse(m.batch);
    for (auto& a : m.after) a();
    if (!commit_failure_.ok()) continue;  // agents are told nothing that was not committed
    if (sink_) {
      for (auto& msg : m.messages) sink_->Send(msg.node, std::move(msg.message));
    }
    if (!m.batch.empty()) {
      MutexLock l(mu_);
      stats_.commits++;
    }
  }
}

Status StateOwner::failure() const {
  MutexLock l(mu_);
  return failure_;
}

Status StateOwner::CommitOrRefuse(const StoreBatch& batch) {
  if (Status earlier = failure(); !earlier.ok())
    return earlier;  // built on the failed batch's state
  Status s;
  {
    MutexLock store(store_mu_);
    s = store_->Commit(batch);
  }
  if (IsFenced(s)) {  // another controller took the lease; this one must not act
    spdlog::critical("the store refused this leader's commit: {}; exiting", s.message());
    std::_Exit(75);
  }
  if (s.ok()) return s;
  // The in-memory state is now ahead of the store, and every batch after this one builds on it:
  // none of them may count. Their callers are answered with this failure (a full disk: 503, and
  // nothing was accepted) and the controller stops; restarted, it rebuilds from the store.
  spdlog::critical(
      "cannot commit to the store: {}; refusing every change from now on, and stopping",
      s.message());
  MutexLock l(mu_);
  failure_ = s;
  return s;
}

}  // namespace hangar::controller
