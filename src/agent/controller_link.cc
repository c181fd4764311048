#include "agent/controller_link.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <vector>

#include "agent/task_journal.h"

namespace hangar::agent {

namespace {

// Ended tasks' progress entries go when the table grows past this (tasks per node are few).
constexpr size_t kMaxTracked = 4096;

}  // namespace

ControllerLink::ControllerLink(std::string node, std::string state_dir, std::string controllers)
    : node_(std::move(node)),
      state_dir_(std::move(state_dir)),
      controllers_(std::move(controllers)) {}

void ControllerLink::LoadStoreId() { store_id_ = ReadStoreId(state_dir_); }

void ControllerLink::ForgetStore() {
  {
    MutexLock l(mu_);
    held_.clear();
  }
  store_id_.clear();
  if (!WriteStoreId(state_dir_, "")) {
    spdlog::error("agent {}: cannot remove {}/store_id", node_, state_dir_);
  }
}

std::string ControllerLink::NextController() {
  std::vector<std::string> all;
  std::stringstream in(controllers_);
  for (std::string a; std::getline(in, a, ',');) {
    if (!a.empty()) all.push_back(a);
  }
  if (all.empty()) return controllers_;
  return all[next_controller_++ % all.size()];
}

std::map<std::string, pb::CheckpointDone> ControllerLink::Attach(Stream* stream,
                                                                 grpc::ClientContext* call) {
  std::map<std::string, pb::CheckpointDone> held;
  MutexLock l(mu_);
  stream_ = stream;
  call_ = call;
  held.swap(held_);
  return held;
}

void ControllerLink::Detach() {
  MutexLock l(mu_);
  stream_ = nullptr;
  call_ = nullptr;
}

void ControllerLink::Cancel() {
  MutexLock l(mu_);
  if (call_) call_->TryCancel();
}

bool ControllerLink::Write(const pb::AgentMessage& m) {
  MutexLock l(mu_);
  return stream_ && stream_->Write(m);
}

bool ControllerLink::WriteOrHold(const pb::CheckpointDone& done) {
  pb::AgentMessage m;
  *m.mutable_checkpoint_done() = done;
  // Under the lock, so that Session either has the stream up or collects the report on Attach.
  MutexLock l(mu_);
  if (stream_ && stream_->Write(m)) return true;
  held_[done.task_id()] = done;
  return false;
}

bool ControllerLink::ProgressDue(const std::string& task_id, int64_t now_ns, int64_t every_ns) {
  MutexLock l(mu_);
  auto [sent, fresh] = progress_sent_.try_emplace(task_id, now_ns);
  if (!fresh && now_ns - sent->second < every_ns) return false;
  sent->second = now_ns;
  if (progress_sent_.size() > kMaxTracked) progress_sent_.clear();
  return true;
}

void ControllerLink::ForgetProgress(const std::string& task_id) {
  MutexLock l(mu_);
  progress_sent_.erase(task_id);
}

bool ControllerLink::Accept(const pb::ControllerMessage& in, const std::string& controller) {
  if (in.epoch() < newest_epoch_) {
    spdlog::warn("agent {}: refused a message of epoch {} from {}: epoch {} leads now", node_,
                 in.epoch(), controller, newest_epoch_);
    return false;
  }
  newest_epoch_ = in.epoch();
  if (in.store_id().empty() || in.store_id() == store_id_) return true;
  if (!store_id_.empty()) {  // the controller let us in, so it runs on another store than it did
    spdlog::error(
        "agent {}: refused a message from {}: it serves store {}, this agent store {} (its tasks "
        "belong to that one); restart the agent with --forget-store to serve the new one",
        node_, controller, in.store_id(), store_id_);
    return false;
  }
  store_id_ = in.store_id();  // the first controller this agent serves
  if (!WriteStoreId(state_dir_, store_id_)) {
    spdlog::error("agent {}: cannot write {}/store_id", node_, state_dir_);
  }
  spdlog::info("agent {}: serves the controller store {}", node_, store_id_);
  return true;
}

}  // namespace hangar::agent
