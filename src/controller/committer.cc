#include "controller/committer.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace hangar::controller {

namespace {

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

Committer::Committer(std::unique_ptr<StateStore> store) : store_(std::move(store)) {}

void Committer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Committer::Stop() {
  {
    MutexLock l(mu_);
    stopping_ = true;  // after the owner's last batch: the committer drains, then ends
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Committer::Hand(StoreBatch batch, AfterCommit after, std::vector<Outgoing> messages) {
  MutexLock l(mu_);
  l.Wait(changed_, [&]() HANGAR_REQUIRES(mu_) { return made_rows_ < kMaxWaitingRows; });
  made_rows_ += Rows(batch);
  // Merged into the batch waiting before it, unless either empties the store first (a restore):
  // rows of the same job or key keep their order, and the store keeps the last.
  if (!made_.empty() && !made_.back().batch.erase_all && !batch.erase_all) {
    Made& m = made_.back();
    Append(m.batch.jobs, batch.jobs);
    Append(m.batch.nodes, batch.nodes);
    Append(m.batch.events, batch.events);
    Append(m.batch.values, batch.values);
    Append(m.batch.audit, batch.audit);
    Append(m.batch.history, batch.history);
    if (!batch.history_upkeep.empty()) m.batch.history_upkeep = batch.history_upkeep;  // the later
    Append(m.after, after);
    Append(m.messages, messages);
  } else {
    made_.push_back(Made{std::move(batch), std::move(after), std::move(messages)});
  }
  l.Unlock();
  changed_.notify_all();
}

void Committer::Loop() {
  while (true) {
    Made m;
    {
      MutexLock l(mu_);
      l.Wait(changed_, [&]() HANGAR_REQUIRES(mu_) { return stopping_ || !made_.empty(); });
      if (made_.empty()) return;  // stopping, and everything made was committed
      m = std::move(made_.front());
      made_.pop_front();
      made_rows_ -= Rows(m.batch);
    }
    changed_.notify_all();  // the owner may wait for room
    batch_failure_ = CommitOrRefuse(m.batch);
    for (auto& a : m.after) a();
    if (!batch_failure_.ok()) continue;  // agents are told nothing that was not committed
    if (sink_) {
      for (auto& msg : m.messages) sink_->Send(msg.node, std::move(msg.message));
    }
    if (!m.batch.empty()) {
      MutexLock l(mu_);
      commits_++;
    }
  }
}

Status Committer::failure() const {
  MutexLock l(mu_);
  return failure_;
}

int64_t Committer::commits() const {
  MutexLock l(mu_);
  return commits_;
}

Status Committer::CommitOrRefuse(const StoreBatch& batch) {
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
