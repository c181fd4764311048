// Checkpoints on node-local scratch (`hangar agent --scratch-dir`): the task's
// HANGAR_CHECKPOINT_DIR is the job's folder on this node's scratch, restored from the shared store
// before the task starts; each `hangar checkpoint-done` is drained to the store in the background
// (checkpoint_drain.h) and forwarded to the controller once durable; the ends of the job's tasks
// on this node wait for its drains, so that the job is requeued only once its checkpoint is in the
// store.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "agent/agent.h"

namespace hangar::agent {

namespace fs = std::filesystem;

namespace {

std::optional<FileOwner> OwnerOf(const TaskRecord& r) {
  if (r.gid < 0 || r.uid < 0) return std::nullopt;  // the agent's own user
  return FileOwner{static_cast<uid_t>(r.uid), static_cast<gid_t>(r.gid)};
}

CheckpointDrainer::Request RequestOf(const TaskRecord& r, const std::string& path, uint64_t step) {
  CheckpointDrainer::Request q;
  q.job_id = r.job_id;
  q.task_id = r.task_id;
  q.local_dir = r.checkpoint_local;
  q.store_dir = r.checkpoint_store;
  q.owner = OwnerOf(r);
  q.path = path;
  q.step = step;
  return q;
}

// `path` under `from` moved under `to` (the store's name for what the task reported locally).
std::string Rebase(const std::string& path, const std::string& from, const std::string& to) {
  if (path == from) return to;
  if (path.size() > from.size() && path.compare(0, from.size(), from) == 0 &&
      path[from.size()] == '/') {
    return to + path.substr(from.size());
  }
  return path;
}

}  // namespace

Status Agent::PrepareScratchCheckpoint(const pb::Launch& l,
                                       const std::optional<TaskCredentials>& run_as,
                                       TaskLaunch* launch, TaskRecord* r) {
  auto it = l.env().find("HANGAR_CHECKPOINT_DIR");
  if (it == l.env().end() || it->second.empty()) return Status::Ok();
  const fs::path store = fs::path(it->second).lexically_normal();
  if (store.is_relative()) {
    return Status::FailedPrecondition(
        "HANGAR_CHECKPOINT_DIR '" + store.string() +
        "' is a relative path; give the controller an absolute --checkpoint-root");
  }
  const std::string local = options_.scratch_dir + "/checkpoints/job-" + std::to_string(l.job_id());
  std::optional<FileOwner> owner;
  if (run_as) owner = FileOwner{run_as->uid, run_as->gid};
  auto restored = RestoreCheckpoint(store.string(), local, owner, options_.drain_lock_timeout);
  if (!restored.ok()) {
    return Status(
        restored.status().code(),
        "cannot ready the job's checkpoint in node " + options_.node +
            "'s scratch dir: " + restored.status().message() +
            "; check that the shared store (the controller's --checkpoint-root) is mounted here");
  }
  spdlog::info("agent {}: task {}: checkpoints in {}: {}", options_.node, l.task_id(), local,
               restored->why);
  for (auto& [k, v] : launch->env) {
    if (k == "HANGAR_CHECKPOINT_DIR") v = local;
  }
  launch->env.emplace_back("HANGAR_CHECKPOINT_STORE", store.string());
  r->checkpoint_local = local;
  r->checkpoint_store = store.string();
  if (run_as) r->gid = run_as->gid;
  return Status::Ok();
}

void Agent::QueueDrain(const TaskRecord& r, const std::string& path, uint64_t step) {
  {
    MutexLock l(tasks_.mu());
    tasks_.AddDrain(r.job_id);
    if (TaskRecord* it = tasks_.Find(r.task_id)) {
      it->drain_pending = true;
      it->drain_path = path;
      it->drain_step = step;
      tasks_.Save(r.task_id);
    }
  }
  drainer_->Enqueue(RequestOf(r, path, step));
}

void Agent::OnDrained(const CheckpointDrainer::Request& q, const StatusOr<DrainResult>& result) {
  pb::AgentMessage m;
  pb::CheckpointDone* done = m.mutable_checkpoint_done();
  done->set_task_id(q.task_id);
  done->set_job_id(q.job_id);
  done->set_time_ms(clock_->Now());
  done->set_step(q.step);
  if (result.ok()) {
    done->set_path(Rebase(q.path, q.local_dir, q.store_dir));
    done->set_drained(true);
    done->set_drain_ms(result->took);
    spdlog::info(
        "agent {}: task {}: checkpoint durable in {} as {} ({} files, {} bytes copied; {} "
        "unchanged; {} ms)",
        options_.node, q.task_id, q.store_dir, result->generation, result->files_copied,
        result->bytes_copied, result->files_linked, result->took);
  } else {
    done->set_path(q.path);
    done->set_drain_error(result.status().message());
    spdlog::error("agent {}: task {}: its checkpoint is NOT durable: {}", options_.node, q.task_id,
                  result.status().message());
  }
  (void)link_.WriteOrHold(*done);  // as OnCheckpointReport: on the stream now, or held
  std::vector<TaskRecord> release;
  {
    MutexLock l(tasks_.mu());
    if (!tasks_.EndDrain(q.job_id)) return;  // another drain of the job is asked for
    for (auto& [id, r] : tasks_.records()) {
      if (r.job_id != q.job_id) continue;
      r.drain_pending = false;
      if (r.ended && r.status_held) {
        r.status_held = false;
        release.push_back(r);
      }
    }
    tasks_.SaveAll();
  }
  for (const auto& r : release) {
    spdlog::info(
        "agent {}: task {}: its end is reported now that its job's checkpoint drain is over",
        options_.node, r.task_id);
    SendStatus(r);
  }
}

bool Agent::HoldStatus(const std::string& task_id) {
  MutexLock l(tasks_.mu());
  TaskRecord* it = tasks_.Find(task_id);
  if (!it) return false;
  if (!tasks_.Draining(it->job_id)) return false;
  if (!it->status_held) {
    spdlog::info(
        "agent {}: task {} ended; its end is reported once its job's checkpoint is durable in {}",
        options_.node, task_id, it->checkpoint_store.empty() ? "the store" : it->checkpoint_store);
  }
  it->status_held = true;
  return true;
}

void Agent::ResumeDrains() {
  std::vector<CheckpointDrainer::Request> again;
  {
    MutexLock l(tasks_.mu());
    std::set<uint64_t> jobs;
    for (const auto& [id, r] : tasks_.records()) {
      if (!r.drain_pending || r.checkpoint_local.empty() || !jobs.insert(r.job_id).second) continue;
      tasks_.AddDrain(r.job_id);
      again.push_back(RequestOf(r, r.drain_path, r.drain_step));
    }
    for (auto& [id, r] : tasks_.records()) {
      if (r.ended && tasks_.Draining(r.job_id)) r.status_held = true;
    }
  }
  for (auto& q : again) {
    spdlog::info(
        "agent {}: draining job {}'s checkpoint to {} again (a restart of the agent interrupted "
        "it)",
        options_.node, q.job_id, q.store_dir);
    drainer_->Enqueue(std::move(q));
  }
}

}  // namespace hangar::agent
